#include "launcher/local_spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/error.h"

namespace hvd::launcher {
namespace {

bool isExecutableFile(const std::string& path) {
  struct stat st {};
  return ::access(path.c_str(), X_OK) == 0 && ::stat(path.c_str(), &st) == 0 &&
         !S_ISDIR(st.st_mode);
}

// A worker gets stdin, stdout and stderr only: not hvdrun's sockets (the rendezvous listener,
// SSH sessions), pipes or files, which it could hold open past hvdrun or write to. Between fork
// and exec: async-signal-safe calls only.
void closeInheritedDescriptors() {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  rlimit limit{};
  int top = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                ? static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 20))
                : 1 << 16;
  for (int fd = 3; fd < top; ++fd) ::close(fd);
}

std::vector<char*> cStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void execChild(const char* path, char* const* argv, char* const* envp, int outFd,
                            int errFd, pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the launcher already died
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT})
    ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::dup2(outFd, 1);
  ::dup2(errFd, 2);
  closeInheritedDescriptors();
  ::execve(path, argv, envp);
  // After fork only async-signal-safe calls: write the parts, no formatting.
  const char* reason = ::strerror(errno);
  const char* parts[] = {"hvdrun: cannot run ", path, ": ", reason, "\n"};
  for (const char* part : parts) {
    ssize_t ignored = ::write(2, part, ::strlen(part));
    (void)ignored;
  }
  ::_exit(127);
}

}  // namespace

std::string resolveExecutable(const std::string& program, const Environment& env) {
  if (program.empty()) throw InvalidArgument("empty command");
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), F_OK) != 0) throw InvalidArgument(program + ": not found");
    struct stat st {};
    if (::stat(program.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw InvalidArgument(program + ": is a directory, not a program");
    if (!isExecutableFile(program)) throw InvalidArgument(program + ": not executable");
    return program;
  }
  auto it = env.find("PATH");
  std::string path = it != env.end() ? it->second : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (isExecutableFile(candidate)) return candidate;
  }
  throw InvalidArgument(program + ": command not found (searched PATH=" + path + ")");
}

LocalWorker spawnLocal(const std::string& executable, const std::vector<std::string>& argv,
                       const Environment& env) {
  std::vector<std::string> argStrings = argv;
  std::vector<std::string> envStrings;
  for (const auto& [k, v] : env) envStrings.push_back(k + "=" + v);
  auto cArgv = cStrings(argStrings);
  auto cEnv = cStrings(envStrings);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw IoError(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw IoError(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t parent = ::getpid();
  // Block signals across fork: a SIGTERM that reached the child before it reset hvdrun's
  // handlers would run hvdrun's handler there and be lost. The child unblocks after the reset.
  sigset_t all, previous;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &previous);
  pid_t pid = ::fork();
  if (pid != 0) ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    throw IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) execChild(executable.c_str(), cArgv.data(), cEnv.data(), out[1], err[1], parent);
  ::setpgid(pid, pid);  // also in the parent, so the group exists before we ever signal it
  ::close(out[1]);
  ::close(err[1]);
  for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return {pid, out[0], err[0]};
}

}  // namespace hvd::launcher
