#include "launcher/remote_ranks.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <set>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "common/error.h"
#include "common/logging.h"
#include "launcher/ssh/remote_command.h"

namespace hvd::launcher {
namespace {

// A host that vanishes without closing the connection fails its ranks within ~30 s rather than
// whenever TCP gives up; keepalives make a silent peer count as vanished.
constexpr unsigned kUserTimeoutMs = 30000;
constexpr int kKeepaliveSeconds = 10;
// How long a host has to confirm a kill (the rank's remote script exits once the watcher has
// killed the group) before hvdrun counts the rank killed anyway.
constexpr auto kKillConfirmTime = std::chrono::seconds(2);
using Clock = std::chrono::steady_clock;

enum class Phase { Running, Closing, WaitClosed, Done };

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Output of a rank to the job; a job that stopped reading (it closed the read end) loses
// nothing it still wanted.
void sendAll(int& fd, const char* data, std::size_t size) {
  while (fd >= 0 && size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return closeFd(fd);
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

ExitStatus fromRemoteStatus(int status) {
  // The remote shell reports a command killed by signal N as 128+N.
  if (status > 128 && status < 128 + NSIG) return {true, status - 128};
  return {false, status};
}

struct RankChannel {
  RemoteRankSpec spec;
  std::size_t connection = 0;  // index into Host::sessions
  LIBSSH2_CHANNEL* channel = nullptr;
  int outFd = -1, errFd = -1;  // write ends
  Phase phase = Phase::Running;
  std::string lifeline;  // commands for the remote watcher not yet written (remote_command.h)
  bool termQueued = false, killWanted = false, reported = false;
  Clock::time_point killConfirmBy{};  // killWanted: when to stop waiting for the remote exit
};

}  // namespace

// One host's connections and ranks. Everything but the request queue belongs to its thread.
struct RemoteRanks::Host {
  std::vector<std::unique_ptr<ssh::SshSession>> sessions;
  std::vector<RankChannel> ranks;
  std::thread thread;
  int controlRead = -1, controlWrite = -1;  // wakes the host thread for requests
  std::mutex mutex;
  std::vector<std::pair<int, int>> requests;  // (id, signal)
  bool quit = false;
  std::function<void(int id, ExitStatus)> report;
  // A LateHost: checked by the thread itself before its ranks start. The ranks signalled so
  // far (guarded by `mutex`): once every one of them is, nothing waits for the check, which is
  // interrupted instead of running to its timeout.
  std::optional<LateHost> late;
  std::set<int> signalled;
  ssh::ConnectSlots* slots = nullptr;  // the RemoteRanks', for a late host's check

  // The thread's body: check a late host, send every rank its run script, then pump until all
  // have ended.
  void run();

 private:
  struct Round {
    bool progressed = false;  // something moved: go round again before sleeping
    bool pending = false;     // libssh2 holds unread data poll() cannot see
  };
  bool quitting();
  bool checkLateHost();
  void applyRequests();
  void pump(RankChannel& r, Round& round, char* buf, std::size_t size);
  void collectExit(RankChannel& r);
  void waitForActivity();
  void finish(RankChannel& r, ExitStatus status, const std::string& why);
  void loseConnection(std::size_t connection, const std::string& why);
};

RemoteRanks::RemoteRanks(std::size_t sshConcurrency) : slots_(sshConcurrency) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw IoError(std::string("remote ranks: pipe: ") + std::strerror(errno));
  wakeRead_ = fds[0];
  wakeWrite_ = fds[1];
}

RemoteRanks::~RemoteRanks() {
  for (auto& h : hosts_) {
    {
      std::lock_guard<std::mutex> lock(h->mutex);
      h->quit = true;
    }
    if (h->late && h->late->check.interrupt) h->late->check.interrupt->interrupt();
    if (h->controlWrite >= 0) (void)!::write(h->controlWrite, "q", 1);
  }
  for (auto& h : hosts_) {
    if (h->thread.joinable()) h->thread.join();
    closeFd(h->controlRead);
    closeFd(h->controlWrite);
    for (auto& r : h->ranks) {
      closeFd(r.outFd);
      closeFd(r.errFd);
    }
  }
  closeFd(wakeRead_);
  closeFd(wakeWrite_);
}

void RemoteRanks::addHost(ssh::ReadyHost ready, std::vector<RemoteRankSpec> ranks) {
  if (ready.channels.size() != ranks.size())
    throw InvalidArgument(detail::concat("remote ranks: ", ranks.size(), " ranks for ",
                                         ready.channels.size(), " checked channels"));
  auto host = std::make_unique<Host>();
  host->sessions = std::move(ready.sessions);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    RankChannel r;
    r.spec = std::move(ranks[i]);
    r.connection = i / ssh::kRanksPerConnection;
    r.channel = ready.channels[i];
    host->ranks.push_back(std::move(r));
  }
  hosts_.push_back(std::move(host));
}

std::vector<RemoteRankStreams> RemoteRanks::openStreams(Host& h) {
  int control[2];
  if (::pipe2(control, O_CLOEXEC | O_NONBLOCK) != 0)
    throw IoError(std::string("remote ranks: pipe: ") + std::strerror(errno));
  h.controlRead = control[0];
  h.controlWrite = control[1];
  std::vector<RemoteRankStreams> out;
  for (auto& r : h.ranks) {
    RemoteRankStreams streams{r.spec.placement, r.spec.id, -1, -1};
    for (auto [readEnd, writeEnd] : {std::pair{&streams.stdoutFd, &r.outFd},
                                     std::pair{&streams.stderrFd, &r.errFd}}) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        throw IoError(std::string("remote ranks: socketpair: ") + std::strerror(errno));
      ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
      ::shutdown(sv[0], SHUT_WR);
      *readEnd = sv[0];
      *writeEnd = sv[1];
    }
    out.push_back(streams);
  }
  return out;
}

void RemoteRanks::startThread(Host& h) {
  h.report = [this](int id, ExitStatus status) { report(id, status); };
  h.thread = std::thread([host = &h] { host->run(); });
}

std::vector<RemoteRankStreams> RemoteRanks::start() {
  std::vector<RemoteRankStreams> out;
  for (auto& h : hosts_) {
    auto streams = openStreams(*h);
    out.insert(out.end(), streams.begin(), streams.end());
  }
  for (auto& h : hosts_) startThread(*h);
  return out;
}

std::vector<RemoteRankStreams> RemoteRanks::launch(LateHost late) {
  auto host = std::make_unique<Host>();
  for (auto& spec : late.ranks) {
    RankChannel r;
    r.spec = spec;
    host->ranks.push_back(std::move(r));
  }
  host->late = std::move(late);
  host->late->check.interrupt = std::make_shared<ssh::CheckInterrupt>();
  host->slots = &slots_;
  auto streams = openStreams(*host);
  hosts_.push_back(std::move(host));
  startThread(*hosts_.back());
  return streams;
}

std::size_t RemoteRanks::rankCount() const {
  std::size_t n = 0;
  for (const auto& h : hosts_) n += h->ranks.size();
  return n;
}

std::vector<std::pair<int, ExitStatus>> RemoteRanks::takeEnded() {
  char buf[64];
  while (::read(wakeRead_, buf, sizeof buf) > 0) {
  }
  std::lock_guard<std::mutex> lock(endedMutex_);
  return std::exchange(ended_, {});
}

void RemoteRanks::signal(int id, int sig) {
  for (auto& h : hosts_)
    for (const auto& r : h->ranks)
      if (r.spec.id == id) {
        bool everyRank = false;
        {
          std::lock_guard<std::mutex> lock(h->mutex);
          h->requests.emplace_back(id, sig);
          h->signalled.insert(id);
          everyRank = h->signalled.size() == h->ranks.size();
        }
        if (everyRank && h->late) h->late->check.interrupt->interrupt();
        (void)!::write(h->controlWrite, "s", 1);
        return;
      }
}

void RemoteRanks::report(int id, ExitStatus status) {
  {
    std::lock_guard<std::mutex> lock(endedMutex_);
    ended_.emplace_back(id, status);
  }
  (void)!::write(wakeWrite_, "e", 1);
}

void RemoteRanks::Host::finish(RankChannel& r, ExitStatus status, const std::string& why) {
  if (!why.empty()) {
    std::string line = "hvdrun: " + why + "\n";
    sendAll(r.errFd, line.data(), line.size());
  }
  closeFd(r.outFd);
  closeFd(r.errFd);
  if (!r.reported) report(r.spec.id, status);
  r.reported = true;
}

// Every rank still on a broken connection fails with the reason; the connection is dropped.
void RemoteRanks::Host::loseConnection(std::size_t c, const std::string& why) {
  for (auto& r : ranks)
    if (r.connection == c && r.phase != Phase::Done) {
      finish(r, {false, 255}, why);
      r.channel = nullptr;  // freed with the session
      r.phase = Phase::Done;
    }
  if (sessions[c]) libssh2_session_set_blocking(sessions[c]->raw(), 1);
  sessions[c].reset();
}

bool RemoteRanks::Host::quitting() {
  std::lock_guard<std::mutex> lock(mutex);
  return quit;
}

void RemoteRanks::Host::applyRequests() {
  // Drain the wake-up bytes before taking the requests: a request queued after the take then
  // leaves its byte in the pipe for the next poll. The other order could swallow that byte and
  // leave the request waiting for the keepalive timeout.
  char buf[64];
  while (::read(controlRead, buf, sizeof buf) > 0) {
  }
  std::vector<std::pair<int, int>> fresh;
  {
    std::lock_guard<std::mutex> lock(mutex);
    fresh.swap(requests);
  }
  for (auto [id, sig] : fresh)
    for (auto& r : ranks)
      if (r.spec.id == id) {
        if (sig == SIGKILL && !r.killWanted) {
          r.killWanted = true;
          r.killConfirmBy = Clock::now() + kKillConfirmTime;
          r.lifeline += ssh::kLifelineKill;
        } else if (!r.termQueued) {
          r.termQueued = true;
          r.lifeline += ssh::kLifelineTerm;
        }
      }
}

// Moves one rank on as far as it can go without blocking.
void RemoteRanks::Host::pump(RankChannel& r, Round& round, char* buf, std::size_t size) {
  // A killed rank ends when its remote script exits, which it does once the watcher has read
  // `kill` and killed the group. Counting it ended as soon as `kill` was queued let hvdrun exit
  // and close the connection before the command had reached the watcher; the closed lifeline
  // then only sent SIGTERM, and ranks that ignore it outlived hvdrun by the grace period. A
  // host that does not confirm in time is given up on (its closed lifeline still stops the
  // group, with SIGTERM, grace, SIGKILL).
  if (r.killWanted && !r.reported && Clock::now() >= r.killConfirmBy) {
    finish(r, {true, SIGKILL},
           detail::concat("no exit from the remote host within ", kKillConfirmTime.count(),
                          " s of the kill; counted as killed"));
    if (r.phase == Phase::Running) r.phase = Phase::Closing;
  }
  if (r.phase == Phase::Running) {
    for (int stream : {0, SSH_EXTENDED_DATA_STDERR}) {
      ssize_t n;
      while ((n = libssh2_channel_read_ex(r.channel, stream, buf, size)) > 0) {
        sendAll(stream == 0 ? r.outFd : r.errFd, buf, static_cast<std::size_t>(n));
        round.progressed = true;
      }
      if (n < 0 && n != LIBSSH2_ERROR_EAGAIN)
        return loseConnection(r.connection,
                              sessions[r.connection]->where() +
                                  "ssh connection lost while rank was running (" +
                                  std::to_string(n) + ")");
    }
    if (!r.lifeline.empty()) {
      ssize_t n = libssh2_channel_write(r.channel, r.lifeline.data(), r.lifeline.size());
      if (n > 0) {
        r.lifeline.erase(0, static_cast<std::size_t>(n));
        round.progressed = true;
      } else if (n != LIBSSH2_ERROR_EAGAIN) {
        r.lifeline.clear();  // the remote side has closed: the rank is ending anyway
      }
    }
    if (libssh2_channel_eof(r.channel)) r.phase = Phase::Closing;
  }
  if (r.phase == Phase::Closing && libssh2_channel_close(r.channel) != LIBSSH2_ERROR_EAGAIN)
    r.phase = Phase::WaitClosed;
  if (r.phase == Phase::WaitClosed) {
    if (libssh2_channel_wait_closed(r.channel) == LIBSSH2_ERROR_EAGAIN) return;
    collectExit(r);
    round.progressed = true;
    return;
  }
  // Data that another channel's read pulled off the socket waits in libssh2's queue, where
  // poll() cannot see it.
  if (r.phase == Phase::Running) {
    unsigned long avail = 0;
    libssh2_channel_window_read_ex(r.channel, &avail, nullptr);
    round.pending |= avail > 0 || libssh2_channel_eof(r.channel);
  }
}

void RemoteRanks::Host::collectExit(RankChannel& r) {
  char* exitSignal = nullptr;
  libssh2_channel_get_exit_signal(r.channel, &exitSignal, nullptr, nullptr, nullptr, nullptr,
                                  nullptr);
  int status = libssh2_channel_get_exit_status(r.channel);
  std::string signalName = exitSignal ? exitSignal : "";
  if (exitSignal) libssh2_free(sessions[r.connection]->raw(), exitSignal);
  libssh2_channel_free(r.channel);
  r.channel = nullptr;
  r.phase = Phase::Done;
  if (!signalName.empty())
    finish(r, {false, 255}, "the remote shell was ended by SIG" + signalName);
  else
    finish(r, fromRemoteStatus(status), "");
}

// Sleeps until a connection or the job has something, sending keepalives on the way.
void RemoteRanks::Host::waitForActivity() {
  std::vector<pollfd> fds{{controlRead, POLLIN, 0}};
  std::vector<std::size_t> owner{0};
  int timeoutMs = kKeepaliveSeconds * 1000;
  auto now = Clock::now();
  for (const auto& r : ranks)
    if (r.killWanted && !r.reported) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(r.killConfirmBy - now).count();
      timeoutMs = std::min<int>(timeoutMs, static_cast<int>(std::max<int64_t>(left, 0)));
    }
  for (std::size_t c = 0; c < sessions.size(); ++c) {
    if (!sessions[c]) continue;
    LIBSSH2_SESSION* s = sessions[c]->raw();
    int next = kKeepaliveSeconds;
    libssh2_keepalive_send(s, &next);
    timeoutMs = std::min(timeoutMs, std::max(1, next) * 1000);
    int dirs = libssh2_session_block_directions(s);
    short events = 0;
    if (dirs & LIBSSH2_SESSION_BLOCK_INBOUND) events |= POLLIN;
    if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) events |= POLLOUT;
    fds.push_back({sessions[c]->socket(), static_cast<short>(events ? events : POLLIN), 0});
    owner.push_back(c);
  }
  int n = ::poll(fds.data(), fds.size(), timeoutMs);
  if (n < 0 && errno != EINTR) {
    log::logger("launcher")->error("remote ranks: poll failed: {}", std::strerror(errno));
    for (std::size_t c = 0; c < sessions.size(); ++c)
      loseConnection(c, "hvdrun cannot watch its ssh connections: poll failed");
    return;
  }
  for (std::size_t i = 1; n > 0 && i < fds.size(); ++i)
    if ((fds[i].revents & (POLLERR | POLLHUP)) && !(fds[i].revents & POLLIN))
      loseConnection(owner[i],
                     sessions[owner[i]]->where() + "ssh connection lost while rank was running");
}

// A late host's check, on its own thread: false when it failed (every rank has ended).
bool RemoteRanks::Host::checkLateHost() {
  std::string why;
  try {
    ssh::PreflightReport checked = ssh::preflight({late->check}, *slots);
    auto ready = checked.ready.find(late->check.target.alias);
    if (ready == checked.ready.end()) {
      why = checked.failures.empty() ? "the host failed the check" : checked.failures[0];
    } else {
      sessions = std::move(ready->second.sessions);
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        RankChannel& r = ranks[i];
        r.connection = i / ssh::kRanksPerConnection;
        r.channel = ready->second.channels[i];
        r.spec.script = late->scriptFor(r.spec, ready->second.localAddress);
      }
      return true;
    }
  } catch (const Error& e) {
    why = e.what();
  }
  // Stopped while being checked: the ranks end as the signal asked, not as a failed host.
  bool stopped = late->check.interrupt->interrupted();
  if (stopped) applyRequests();
  for (auto& r : ranks) {
    ExitStatus status{false, 255};
    status.unstarted = true;
    if (stopped) status = {true, r.killWanted ? SIGKILL : SIGTERM};
    finish(r, status, stopped ? "" : why);
    r.channel = nullptr;  // freed with the sessions
    r.phase = Phase::Done;
  }
  sessions.clear();
  return false;
}

void RemoteRanks::Host::run() {
  if (late && !checkLateHost()) return;
  // A rank the job stopped while its host was being checked never starts: its check shell
  // exits when the channel closes.
  applyRequests();
  for (auto& r : ranks) {
    if (quitting()) break;
    if (r.phase == Phase::Done) continue;  // its connection was lost
    if (r.termQueued || r.killWanted) {
      finish(r, {true, r.killWanted ? SIGKILL : SIGTERM}, "");
      r.lifeline.clear();
      r.phase = Phase::Closing;
      continue;
    }
    try {
      sessions[r.connection]->writeAll(r.channel, ssh::framed(r.spec.script), "the rank");
    } catch (const Error& e) {
      loseConnection(r.connection, e.what());
    }
  }
  for (auto& s : sessions)
    if (s) {
      ::setsockopt(s->socket(), IPPROTO_TCP, TCP_USER_TIMEOUT, &kUserTimeoutMs,
                   sizeof kUserTimeoutMs);
      libssh2_keepalive_config(s->raw(), 1, kKeepaliveSeconds);
      libssh2_session_set_blocking(s->raw(), 0);
    }
  std::vector<char> buf(65536);
  while (!quitting()) {
    applyRequests();
    Round round;
    bool anyLeft = false;
    for (auto& r : ranks)
      if (r.phase != Phase::Done) {
        anyLeft = true;
        pump(r, round, buf.data(), buf.size());
      }
    if (!anyLeft) break;
    if (!round.progressed && !round.pending) waitForActivity();
  }
  // Closing the connections ends the lifeline of every rank still running there.
  for (auto& s : sessions)
    if (s) libssh2_session_set_blocking(s->raw(), 1);
  sessions.clear();
}

}  // namespace hvd::launcher
