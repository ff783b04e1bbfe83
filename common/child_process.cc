#include "common/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

extern char** environ;

namespace hvd {
namespace {

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0) throw IoError(std::string("pipe: ") + std::strerror(errno));
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close(int end) {
    if (fd[end] >= 0) ::close(fd[end]);
    fd[end] = -1;
  }
};

// Writes to the program's stdin with SIGPIPE blocked, so that a program that stopped reading
// fails the write (EPIPE) instead of killing this process; a SIGPIPE left pending is taken.
ssize_t writeWithoutSigpipe(int fd, const char* data, std::size_t size) {
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  ssize_t n = ::write(fd, data, size);
  int saved = errno;
  if (n < 0 && errno == EPIPE) {
    timespec none{0, 0};
    sigtimedwait(&pipe, nullptr, &none);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return n;
}

int waitFor(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

ProgramResult runProgram(const std::vector<std::string>& argv, const std::string& input,
                         std::chrono::milliseconds timeout, std::size_t outputLimit) {
  Pipe in, out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw IoError("cannot run " + argv[0] + ": " + std::strerror(rc));
  in.close(0);
  out.close(1);
  err.close(1);
  ::fcntl(in.fd[1], F_SETFL, O_NONBLOCK);
  ProgramResult result;
  std::size_t written = 0;
  if (input.empty()) in.close(1);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      waitFor(pid);
      throw TimeoutError(
          detail::concat(argv[0], " did not finish within ", timeout.count(), " ms"));
    }
    pollfd fds[3] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}, {in.fd[1], POLLOUT, 0}};
    if (::poll(fds, 3, static_cast<int>(left.count())) < 0 && errno != EINTR)
      throw IoError(std::string("poll: ") + std::strerror(errno));
    if (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) {
      ssize_t n = writeWithoutSigpipe(in.fd[1], input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = input.size();  // it stopped reading
      if (written == input.size()) in.close(1);
    }
    for (int s = 0; s < 2; ++s) {
      Pipe& p = s == 0 ? out : err;
      std::string& text = s == 0 ? result.out : result.err;
      if (!(fds[s].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(p.fd[0], buf, sizeof buf);
      if (n > 0 && text.size() < outputLimit)
        text.append(buf, std::min(static_cast<std::size_t>(n), outputLimit - text.size()));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) p.close(0);
    }
  }
  in.close(1);
  result.exitCode = waitFor(pid);
  return result;
}

}  // namespace hvd
