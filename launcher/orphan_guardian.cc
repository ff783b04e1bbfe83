#include "launcher/orphan_guardian.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace hvd::launcher {
namespace {

constexpr std::size_t kMessageBytes = 1 + sizeof(pid_t);

bool anyAlive(const std::vector<pid_t>& groups) {
  for (pid_t g : groups)
    if (::kill(-g, 0) == 0) return true;
  return false;
}

[[noreturn]] void guardianMain(int fd, std::chrono::seconds grace) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);
  std::vector<pid_t> groups;
  char buf[256];
  std::size_t have = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf + have, sizeof buf - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // hvdrun is gone
    have += static_cast<std::size_t>(n);
    std::size_t used = 0;
    for (; have - used >= kMessageBytes; used += kMessageBytes) {
      pid_t value;
      std::memcpy(&value, buf + used + 1, sizeof value);
      if (buf[used] == 'Q') ::_exit(0);
      if (buf[used] == 'W') groups.push_back(value);
    }
    std::memmove(buf, buf + used, have - used);
    have -= used;
  }
  if (groups.empty()) ::_exit(0);
  const char msg[] = "hvdrun: the launcher died; stopping its workers\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
  for (pid_t g : groups) ::kill(-g, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (anyAlive(groups) && std::chrono::steady_clock::now() < deadline) ::poll(nullptr, 0, 50);
  for (pid_t g : groups) ::kill(-g, SIGKILL);
  ::_exit(0);
}

}  // namespace

std::unique_ptr<OrphanGuardian> OrphanGuardian::start(std::chrono::seconds grace) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw IoError(std::string("guardian pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) throw IoError(std::string("guardian fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[1]);
    guardianMain(fds[0], grace);
  }
  ::close(fds[0]);
  return std::unique_ptr<OrphanGuardian>(new OrphanGuardian(pid, fds[1]));
}

OrphanGuardian::~OrphanGuardian() {
  if (fd_ >= 0) ::close(fd_);
  if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
}

void OrphanGuardian::send(char command, pid_t value) {
  char msg[kMessageBytes];
  msg[0] = command;
  std::memcpy(msg + 1, &value, sizeof value);
  ssize_t n;
  do n = ::write(fd_, msg, sizeof msg);
  while (n < 0 && errno == EINTR);
}

void OrphanGuardian::watch(pid_t processGroup) { send('W', processGroup); }

void OrphanGuardian::dismiss() {
  if (fd_ < 0) return;
  send('Q', 0);
  ::close(fd_);
  fd_ = -1;
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace hvd::launcher
