#include "launcher/orphan_guardian.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/transport/shm/shm_cleanup.h"
#include "common/error.h"

namespace hvd::launcher {
namespace {

// A message: one command byte and a pid_t; 'P' (the segment prefix) is followed by as many
// bytes as its value says.
constexpr std::size_t kMessageBytes = 1 + sizeof(pid_t);
constexpr std::size_t kMaxPrefixBytes = 128;
// How long the guardian waits for killed workers to be gone before removing their segments.
constexpr std::chrono::seconds kReapWait{2};

bool anyAlive(const std::vector<pid_t>& groups) {
  for (pid_t g : groups)
    if (::kill(-g, 0) == 0) return true;
  return false;
}

[[noreturn]] void guardianMain(int fd, std::chrono::seconds grace) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);
  std::vector<pid_t> groups;
  std::string segmentPrefix;
  char buf[512];
  std::size_t have = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf + have, sizeof buf - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // hvdrun is gone
    have += static_cast<std::size_t>(n);
    std::size_t used = 0;
    while (have - used >= kMessageBytes) {
      pid_t value;
      std::memcpy(&value, buf + used + 1, sizeof value);
      char command = buf[used];
      if (command == 'Q') ::_exit(0);
      if (command == 'W') groups.push_back(value);
      if (command == 'P') {
        auto length = static_cast<std::size_t>(value);
        if (have - used < kMessageBytes + length) break;  // the rest is still coming
        segmentPrefix.assign(buf + used + kMessageBytes, length);
        used += length;
      }
      used += kMessageBytes;
    }
    std::memmove(buf, buf + used, have - used);
    have -= used;
  }
  if (groups.empty() && segmentPrefix.empty()) ::_exit(0);
  if (!groups.empty()) {
    const char msg[] = "hvdrun: the launcher died; stopping its workers\n";
    ssize_t ignored = ::write(2, msg, sizeof msg - 1);
    (void)ignored;
  }
  for (pid_t g : groups) ::kill(-g, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (anyAlive(groups) && std::chrono::steady_clock::now() < deadline) ::poll(nullptr, 0, 50);
  for (pid_t g : groups) ::kill(-g, SIGKILL);
  if (!segmentPrefix.empty()) {
    // A worker killed while it set up shared memory leaves its segment's name in /dev/shm.
    deadline = std::chrono::steady_clock::now() + kReapWait;
    while (anyAlive(groups) && std::chrono::steady_clock::now() < deadline) ::poll(nullptr, 0, 20);
    collectives::shm::removeSegments(segmentPrefix);
    // A worker hvdrun started but had not yet named to the guardian ends on its parent-death
    // signal within moments; what it made by then goes too.
    ::poll(nullptr, 0, 300);
    collectives::shm::removeSegments(segmentPrefix);
  }
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

void OrphanGuardian::removeSegmentsOnDeath(const std::string& prefix) {
  HVD_ENFORCE(!prefix.empty() && prefix.size() <= kMaxPrefixBytes, "segment prefix '", prefix, "'");
  std::string msg(kMessageBytes, '\0');
  msg[0] = 'P';
  auto length = static_cast<pid_t>(prefix.size());
  std::memcpy(msg.data() + 1, &length, sizeof length);
  msg += prefix;
  // One write below PIPE_BUF bytes: the guardian never sees half of it interleaved.
  ssize_t n;
  do n = ::write(fd_, msg.data(), msg.size());
  while (n < 0 && errno == EINTR);
}

void OrphanGuardian::dismiss() {
  if (fd_ < 0) return;
  send('Q', 0);
  ::close(fd_);
  fd_ = -1;
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace hvd::launcher
