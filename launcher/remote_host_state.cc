#include "launcher/remote_host_state.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "launcher/ssh/remote_command.h"

namespace hvd::launcher {

ExitStatus fromRemoteStatus(int status) {
  if (status > 128 && status < 128 + NSIG) return {true, status - 128};
  return {false, status};
}

RemoteHostState::RemoteHostState(std::size_t ranks, std::size_t ranksPerConnection)
    : ranks_(ranks),
      connections_((ranks + ranksPerConnection - 1) / ranksPerConnection),
      dropped_(connections_, false) {
  HVD_ENFORCE(ranksPerConnection > 0);
  for (std::size_t i = 0; i < ranks; ++i) ranks_[i].connection = i / ranksPerConnection;
}

std::size_t RemoteHostState::connectionOf(std::size_t rank) const {
  return ranks_.at(rank).connection;
}

std::vector<HostAction> RemoteHostState::takeActions() { return std::exchange(actions_, {}); }

bool RemoteHostState::done() const {
  return std::all_of(ranks_.begin(), ranks_.end(),
                     [](const Rank& r) { return r.phase == Phase::Done; });
}

void RemoteHostState::finish(std::size_t rank, ExitStatus status, std::string why) {
  Rank& r = ranks_[rank];
  if (r.reported) return;  // its streams are closed already: nothing more reaches the job
  r.reported = true;
  HostAction a;
  a.kind = HostAction::Kind::Finish;
  a.rank = rank;
  a.status = status;
  a.why = std::move(why);
  actions_.push_back(std::move(a));
}

void RemoteHostState::loseConnection(std::size_t c, const std::string& why) {
  for (std::size_t i = 0; i < ranks_.size(); ++i)
    if (ranks_[i].connection == c && ranks_[i].phase != Phase::Done) {
      ExitStatus lost{false, 255};
      lost.connectionLost = true;
      finish(i, lost, why);
      ranks_[i].phase = Phase::Done;  // its channel goes with the connection
    }
  if (dropped_[c]) return;
  dropped_[c] = true;
  HostAction a;
  a.kind = HostAction::Kind::DropConnection;
  a.connection = c;
  actions_.push_back(std::move(a));
}

void RemoteHostState::onSignal(std::size_t rank, int sig, HostTime now) {
  Rank& r = ranks_.at(rank);
  // Each command is queued once. A second SIGKILL falls through to `term` (as it always has):
  // harmless, the watcher has killed the group already.
  if (sig == SIGKILL && !r.killWanted) {
    r.killWanted = true;
    r.killConfirmBy = now + kKillConfirmTime;
    r.lifeline += ssh::kLifelineKill;
  } else if (!r.termQueued) {
    r.termQueued = true;
    r.lifeline += ssh::kLifelineTerm;
  }
}

void RemoteHostState::onCheckFailed(const std::string& why, bool stopped) {
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    ExitStatus status{false, 255};
    status.unstarted = true;
    // Stopped while being checked: the ranks end as the signal asked, not as a failed host.
    if (stopped) status = {true, r.killWanted ? SIGKILL : SIGTERM};
    finish(i, status, stopped ? "" : why);
    r.phase = Phase::Done;
  }
}

bool RemoteHostState::startRank(std::size_t rank) {
  Rank& r = ranks_.at(rank);
  if (r.phase == Phase::Done) return false;  // its connection was lost
  if (r.termQueued || r.killWanted) {
    // Stopped before it started: it never does. Its check shell exits when the channel closes.
    finish(rank, {true, r.killWanted ? SIGKILL : SIGTERM}, "");
    r.lifeline.clear();
    r.phase = Phase::Closing;
    return false;
  }
  return true;
}

void RemoteHostState::onScriptFailed(std::size_t rank, const std::string& why) {
  loseConnection(connectionOf(rank), why);
}

// A round visits every rank in order, each going as far as it can without blocking.
ChannelOp RemoteHostState::next(HostTime now) {
  if (!inRound_) {
    if (done()) return {};
    inRound_ = true;
    cursor_ = 0;
    step_ = Step::Begin;
    progressed_ = pending_ = false;
  }
  while (cursor_ < ranks_.size())
    if (auto op = stepOp(now)) return *op;
  inRound_ = false;
  ChannelOp end;
  // The host is done as soon as its last rank is: no sleep before noticing.
  if (!done()) end.kind = progressed_ || pending_ ? ChannelOp::Kind::Again : ChannelOp::Kind::Sleep;
  return end;
}

void RemoteHostState::nextRank() {
  ++cursor_;
  step_ = Step::Begin;
}

// Starts the current rank's turn: skips an ended rank, gives up on an unconfirmed kill.
void RemoteHostState::beginTurn(HostTime now) {
  Rank& r = ranks_[cursor_];
  if (r.phase == Phase::Done) return nextRank();
  // Counting a rank killed as soon as `kill` was queued let hvdrun exit and close the
  // connection before the command had reached the watcher; the closed lifeline then only sent
  // SIGTERM, and ranks that ignore it outlived hvdrun by the grace period. So a killed rank ends
  // when its script exits, or, from a host that does not confirm in time, now (its closed
  // lifeline still stops the group: SIGTERM, grace, SIGKILL).
  if (r.killWanted && !r.reported && now >= r.killConfirmBy) {
    finish(cursor_, {true, SIGKILL},
           detail::concat("no exit from the remote host within ", kKillConfirmTime.count(),
                          " s of the kill; counted as killed"));
    if (r.phase == Phase::Running) r.phase = Phase::Closing;
  }
  step_ = r.phase == Phase::Running ? Step::ReadOut : Step::Close;
}

ChannelOp RemoteHostState::op(ChannelOp::Kind kind, RankStream stream,
                              std::string_view data) const {
  ChannelOp o;
  o.kind = kind;
  o.rank = cursor_;
  o.stream = stream;
  o.data = data;
  return o;
}

std::nullopt_t RemoteHostState::skipTo(Step step) {
  step_ = step;
  return std::nullopt;
}

// The current rank's operation at its current step, or nothing when the step has none and the
// turn moved on. Reads come before the EOF check, so output sent before the EOF is forwarded
// before the channel is closed.
std::optional<ChannelOp> RemoteHostState::stepOp(HostTime now) {
  using Kind = ChannelOp::Kind;
  Rank& r = ranks_[cursor_];
  switch (step_) {
    case Step::Begin:
      beginTurn(now);
      return std::nullopt;
    case Step::ReadOut:
      return op(Kind::Read, RankStream::Stdout);
    case Step::ReadErr:
      return op(Kind::Read, RankStream::Stderr);
    case Step::Write:
      if (r.lifeline.empty()) return skipTo(Step::Eof);
      return op(Kind::WriteLifeline, RankStream::Stdout, r.lifeline);
    case Step::Eof:
      return op(Kind::CheckEof);
    case Step::Close:
      if (r.phase != Phase::Closing) return skipTo(Step::Wait);
      return op(Kind::Close);
    case Step::Wait:
      if (r.phase != Phase::WaitClosed) return skipTo(Step::Queued);
      return op(Kind::WaitClosed);
    case Step::Queued:
      // Data that another channel's read pulled off the socket waits in libssh2's queue, where
      // poll() cannot see it.
      if (r.phase == Phase::Running) return op(Kind::CheckQueued);
      nextRank();
      return std::nullopt;
  }
  return std::nullopt;
}

void RemoteHostState::expect(std::size_t rank, Step step) const {
  HVD_ENFORCE(inRound_ && cursor_ == rank && step_ == step, "remote host: an outcome for rank ",
              rank, " that no pending operation asked for");
}

void RemoteHostState::onOutput(std::size_t rank, RankStream stream, std::string_view bytes) {
  expect(rank, stream == RankStream::Stdout ? Step::ReadOut : Step::ReadErr);
  HostAction a;
  a.kind = HostAction::Kind::Forward;
  a.rank = rank;
  a.stream = stream;
  a.data = bytes;
  actions_.push_back(std::move(a));
  progressed_ = true;
}

void RemoteHostState::onDrained(std::size_t rank, RankStream stream) {
  expect(rank, stream == RankStream::Stdout ? Step::ReadOut : Step::ReadErr);
  step_ = stream == RankStream::Stdout ? Step::ReadErr : Step::Write;
}

void RemoteHostState::onReadFailed(std::size_t rank, const std::string& why) {
  HVD_ENFORCE(step_ == Step::ReadOut || step_ == Step::ReadErr);
  expect(rank, step_);
  loseConnection(ranks_[rank].connection,
                 where_ + "ssh connection lost while rank was running: " + why);
  nextRank();
}

void RemoteHostState::onLifelineWritten(std::size_t rank, std::size_t bytes) {
  expect(rank, Step::Write);
  ranks_[rank].lifeline.erase(0, bytes);
  progressed_ = true;
  step_ = Step::Eof;
}

void RemoteHostState::onLifelineWouldBlock(std::size_t rank) {
  expect(rank, Step::Write);
  step_ = Step::Eof;
}

void RemoteHostState::onLifelineRefused(std::size_t rank) {
  expect(rank, Step::Write);
  ranks_[rank].lifeline.clear();
  step_ = Step::Eof;
}

void RemoteHostState::onEof(std::size_t rank, bool eof) {
  expect(rank, Step::Eof);
  if (eof) ranks_[rank].phase = Phase::Closing;
  step_ = Step::Close;
}

void RemoteHostState::onCloseSent(std::size_t rank, bool wouldBlock) {
  expect(rank, Step::Close);
  if (!wouldBlock) ranks_[rank].phase = Phase::WaitClosed;
  step_ = Step::Wait;
}

void RemoteHostState::onStillClosing(std::size_t rank) {
  expect(rank, Step::Wait);
  nextRank();
}

void RemoteHostState::onExit(std::size_t rank, int status, const std::string& exitSignal) {
  expect(rank, Step::Wait);
  ranks_[rank].phase = Phase::Done;
  progressed_ = true;
  if (!exitSignal.empty())
    finish(rank, {false, 255}, "the remote shell was ended by SIG" + exitSignal);
  else
    finish(rank, fromRemoteStatus(status), "");
  nextRank();
}

void RemoteHostState::onQueued(std::size_t rank, bool queued) {
  expect(rank, Step::Queued);
  pending_ |= queued;
  nextRank();
}

int RemoteHostState::pollTimeoutMs(HostTime now,
                                   const std::vector<int>& keepaliveNextSeconds) const {
  int timeoutMs = kKeepaliveSeconds * 1000;
  for (const Rank& r : ranks_)
    if (r.killWanted && !r.reported) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(r.killConfirmBy - now).count();
      timeoutMs = std::min<int>(timeoutMs, static_cast<int>(std::max<int64_t>(left, 0)));
    }
  for (int next : keepaliveNextSeconds) timeoutMs = std::min(timeoutMs, std::max(1, next) * 1000);
  return timeoutMs;
}

void RemoteHostState::onSocketEvents(std::size_t connection, bool readable, bool errorOrHangup) {
  // Readable with a hang-up: the last bytes (the exit status, the close) are read first.
  if (errorOrHangup && !readable)
    loseConnection(connection, where_ + "ssh connection lost while rank was running");
}

void RemoteHostState::onPollFailed() {
  for (std::size_t c = 0; c < connections_; ++c)
    loseConnection(c, "hvdrun cannot watch its ssh connections: poll failed");
}

}  // namespace hvd::launcher
