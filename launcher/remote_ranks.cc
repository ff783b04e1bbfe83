#include "launcher/remote_ranks.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/logging.h"
#include "launcher/remote_host_state.h"
#include "launcher/ssh/remote_command.h"

namespace hvd::launcher {
namespace {

// A host that vanishes without closing the connection fails its ranks within ~30 s rather than
// whenever TCP gives up; keepalives (every kKeepaliveSeconds) make a silent peer count as
// vanished.
constexpr unsigned kUserTimeoutMs = 30000;
using Clock = std::chrono::steady_clock;

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

struct RankChannel {
  RemoteRankSpec spec;
  LIBSSH2_CHANNEL* channel = nullptr;
  int outFd = -1, errFd = -1;  // write ends
};

}  // namespace

// One host's connections and ranks. Everything but the request queue belongs to its thread.
// The decisions are RemoteHostState's; this performs the I/O it asks for.
struct RemoteRanks::Host {
  std::vector<std::unique_ptr<ssh::SshSession>> sessions;
  std::vector<RankChannel> ranks;
  std::optional<RemoteHostState> state;  // made once `ranks` is complete
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
  bool quitting();
  bool checkLateHost();
  void applyRequests();
  void startRanks();
  void configureSessions();
  ChannelOp pumpRound(std::vector<char>& buf);
  bool perform(const ChannelOp& op, std::vector<char>& buf);
  void read(const ChannelOp& op, std::vector<char>& buf);
  void writeLifeline(const ChannelOp& op);
  void collectExit(std::size_t rank);
  void waitForActivity();
  void performActions();
  void finish(RankChannel& r, const HostAction& a);
  void dropConnection(std::size_t connection);
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
    r.channel = ready.channels[i];
    host->ranks.push_back(std::move(r));
  }
  host->state.emplace(host->ranks.size(), ssh::kRanksPerConnection);
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
    for (auto [readEnd, writeEnd] :
         {std::pair{&streams.stdoutFd, &r.outFd}, std::pair{&streams.stderrFd, &r.errFd}}) {
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
  host->state.emplace(host->ranks.size(), ssh::kRanksPerConnection);
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
  while (::read(wakeRead_, buf, sizeof buf) > 0) {}
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

void RemoteRanks::Host::finish(RankChannel& r, const HostAction& a) {
  if (!a.why.empty()) {
    std::string line = "hvdrun: " + a.why + "\n";
    sendAll(r.errFd, line.data(), line.size());
  }
  closeFd(r.outFd);
  closeFd(r.errFd);
  report(r.spec.id, a.status);
}

void RemoteRanks::Host::dropConnection(std::size_t c) {
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (state->connectionOf(i) == c) ranks[i].channel = nullptr;  // freed with the session
  if (c >= sessions.size() || !sessions[c]) return;
  libssh2_session_set_blocking(sessions[c]->raw(), 1);
  sessions[c].reset();
}

void RemoteRanks::Host::performActions() {
  for (const HostAction& a : state->takeActions()) {
    switch (a.kind) {
      case HostAction::Kind::Forward: {
        RankChannel& r = ranks[a.rank];
        sendAll(a.stream == RankStream::Stdout ? r.outFd : r.errFd, a.data.data(), a.data.size());
        break;
      }
      case HostAction::Kind::Finish:
        finish(ranks[a.rank], a);
        break;
      case HostAction::Kind::DropConnection:
        dropConnection(a.connection);
        break;
    }
  }
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
  while (::read(controlRead, buf, sizeof buf) > 0) {}
  std::vector<std::pair<int, int>> fresh;
  {
    std::lock_guard<std::mutex> lock(mutex);
    fresh.swap(requests);
  }
  for (auto [id, sig] : fresh)
    for (std::size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i].spec.id == id) state->onSignal(i, sig, Clock::now());
}

void RemoteRanks::Host::read(const ChannelOp& op, std::vector<char>& buf) {
  int stream = op.stream == RankStream::Stdout ? 0 : SSH_EXTENDED_DATA_STDERR;
  ssize_t n = libssh2_channel_read_ex(ranks[op.rank].channel, stream, buf.data(), buf.size());
  if (n > 0)
    state->onOutput(op.rank, op.stream, {buf.data(), static_cast<std::size_t>(n)});
  else if (n < 0 && n != LIBSSH2_ERROR_EAGAIN)
    state->onReadFailed(op.rank, detail::concat(sessions[state->connectionOf(op.rank)]->lastError(),
                                                " (libssh2 error ", n, ")"));
  else
    state->onDrained(op.rank, op.stream);
}

void RemoteRanks::Host::writeLifeline(const ChannelOp& op) {
  ssize_t n = libssh2_channel_write(ranks[op.rank].channel, op.data.data(), op.data.size());
  if (n > 0)
    state->onLifelineWritten(op.rank, static_cast<std::size_t>(n));
  else if (n == LIBSSH2_ERROR_EAGAIN)
    state->onLifelineWouldBlock(op.rank);
  else
    state->onLifelineRefused(op.rank);
}

void RemoteRanks::Host::collectExit(std::size_t rank) {
  RankChannel& r = ranks[rank];
  char* exitSignal = nullptr;
  libssh2_channel_get_exit_signal(r.channel, &exitSignal, nullptr, nullptr, nullptr, nullptr,
                                  nullptr);
  int status = libssh2_channel_get_exit_status(r.channel);
  std::string signalName = exitSignal ? exitSignal : "";
  if (exitSignal) libssh2_free(sessions[state->connectionOf(rank)]->raw(), exitSignal);
  libssh2_channel_free(r.channel);
  r.channel = nullptr;
  state->onExit(rank, status, signalName);
}

// Performs one channel operation and reports its outcome; false when the op ends the round.
bool RemoteRanks::Host::perform(const ChannelOp& op, std::vector<char>& buf) {
  if (op.kind == ChannelOp::Kind::Again || op.kind == ChannelOp::Kind::Sleep ||
      op.kind == ChannelOp::Kind::HostDone)
    return false;
  LIBSSH2_CHANNEL* channel = ranks[op.rank].channel;
  switch (op.kind) {
    case ChannelOp::Kind::Read:
      read(op, buf);
      return true;
    case ChannelOp::Kind::WriteLifeline:
      writeLifeline(op);
      return true;
    case ChannelOp::Kind::CheckEof:
      state->onEof(op.rank, libssh2_channel_eof(channel) != 0);
      return true;
    case ChannelOp::Kind::Close:
      state->onCloseSent(op.rank, libssh2_channel_close(channel) == LIBSSH2_ERROR_EAGAIN);
      return true;
    case ChannelOp::Kind::WaitClosed:
      if (libssh2_channel_wait_closed(channel) == LIBSSH2_ERROR_EAGAIN)
        state->onStillClosing(op.rank);
      else
        collectExit(op.rank);
      return true;
    case ChannelOp::Kind::CheckQueued: {
      unsigned long avail = 0;
      libssh2_channel_window_read_ex(channel, &avail, nullptr);
      state->onQueued(op.rank, avail > 0 || libssh2_channel_eof(channel));
      return true;
    }
    default:
      return false;
  }
}

// Moves every rank on as far as it can go without blocking; returns how the round ended.
ChannelOp RemoteRanks::Host::pumpRound(std::vector<char>& buf) {
  for (;;) {
    ChannelOp op = state->next(Clock::now());
    performActions();
    if (!perform(op, buf)) return op;
    performActions();  // before the next read reuses `buf`, which forwarded output points into
  }
}

// Sleeps until a connection or the job has something, sending keepalives on the way.
void RemoteRanks::Host::waitForActivity() {
  std::vector<pollfd> fds{{controlRead, POLLIN, 0}};
  std::vector<std::size_t> owner{0};
  std::vector<int> keepaliveNext;
  auto now = Clock::now();
  for (std::size_t c = 0; c < sessions.size(); ++c) {
    if (!sessions[c]) continue;
    LIBSSH2_SESSION* s = sessions[c]->raw();
    int next = kKeepaliveSeconds;
    libssh2_keepalive_send(s, &next);
    keepaliveNext.push_back(next);
    int dirs = libssh2_session_block_directions(s);
    short events = 0;
    if (dirs & LIBSSH2_SESSION_BLOCK_INBOUND) events |= POLLIN;
    if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) events |= POLLOUT;
    fds.push_back({sessions[c]->socket(), static_cast<short>(events ? events : POLLIN), 0});
    owner.push_back(c);
  }
  int n = ::poll(fds.data(), fds.size(), state->pollTimeoutMs(now, keepaliveNext));
  if (n < 0 && errno != EINTR) {
    log::logger("launcher")->error("remote ranks: poll failed: {}", std::strerror(errno));
    state->onPollFailed();
  }
  for (std::size_t i = 1; n > 0 && i < fds.size(); ++i)
    state->onSocketEvents(owner[i], fds[i].revents & POLLIN, fds[i].revents & (POLLERR | POLLHUP));
  performActions();
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
        r.channel = ready->second.channels[i];
        r.spec.script = late->scriptFor(r.spec, ready->second.localAddress);
      }
      return true;
    }
  } catch (const Error& e) {
    why = e.what();
  }
  bool stopped = late->check.interrupt->interrupted();
  if (stopped) applyRequests();
  state->onCheckFailed(why, stopped);
  performActions();
  sessions.clear();
  return false;
}

void RemoteRanks::Host::startRanks() {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (quitting()) break;
    if (state->startRank(i)) {
      try {
        sessions[state->connectionOf(i)]->writeAll(ranks[i].channel,
                                                   ssh::framed(ranks[i].spec.script), "the rank");
      } catch (const Error& e) {
        state->onScriptFailed(i, e.what());
      }
    }
    performActions();
  }
}

// From here on every session is non-blocking, watched by keepalives and TCP's user timeout.
void RemoteRanks::Host::configureSessions() {
  for (auto& s : sessions)
    if (s) {
      ::setsockopt(s->socket(), IPPROTO_TCP, TCP_USER_TIMEOUT, &kUserTimeoutMs,
                   sizeof kUserTimeoutMs);
      libssh2_keepalive_config(s->raw(), 1, kKeepaliveSeconds);
      libssh2_session_set_blocking(s->raw(), 0);
    }
}

void RemoteRanks::Host::run() {
  if (late && !checkLateHost()) return;
  if (!sessions.empty() && sessions[0]) state->setWhere(sessions[0]->where());
  // A rank the job stopped while its host was being checked never starts.
  applyRequests();
  startRanks();
  configureSessions();
  std::vector<char> buf(65536);
  while (!quitting()) {
    applyRequests();
    ChannelOp end = pumpRound(buf);
    if (end.kind == ChannelOp::Kind::HostDone) break;
    if (end.kind == ChannelOp::Kind::Sleep) waitForActivity();
  }
  // Closing the connections ends the lifeline of every rank still running there.
  for (auto& s : sessions)
    if (s) libssh2_session_set_blocking(s->raw(), 1);
  sessions.clear();
}

}  // namespace hvd::launcher
