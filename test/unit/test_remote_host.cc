// A remote host's lifecycle (launcher/remote_host_state.h) driven by made-up channel events:
// no libssh2, no sockets, no threads, time passed in.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <deque>
#include <map>

#include "common/error.h"
#include "launcher/remote_host_state.h"

using namespace hvd::launcher;
using Kind = ChannelOp::Kind;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

const HostTime t0{};

// One rank's channel as the host would show it.
struct FakeChannel {
  std::deque<std::string> out, err;  // chunks, one per read
  bool eof = false;
  std::string readError;                // not empty: the next read of stdout fails with it
  int closeBlocks = 0, waitBlocks = 0;  // times Close / WaitClosed would block first
  int status = 0;
  std::string exitSignal;
  bool queued = false;
  std::size_t writeLimit = 1 << 20;  // bytes one lifeline write takes
  bool lifelineBlocked = false, lifelineRefused = false;
  std::string lifeline;  // what reached the remote watcher
  bool closed = false;
};

// What the job saw: forwarded output, reports, reasons, dropped connections.
struct Job {
  std::map<std::size_t, std::string> out, err;
  std::vector<std::pair<std::size_t, ExitStatus>> ended;
  std::map<std::size_t, std::string> why;
  std::vector<std::size_t> dropped;
  std::vector<std::string> log;  // "forward 0", "finish 0", "drop 0", in order

  void apply(RemoteHostState& s) {
    for (const HostAction& a : s.takeActions()) {
      switch (a.kind) {
        case HostAction::Kind::Forward:
          (a.stream == RankStream::Stdout ? out : err)[a.rank] += std::string(a.data);
          log.push_back("forward " + std::to_string(a.rank));
          break;
        case HostAction::Kind::Finish:
          ended.emplace_back(a.rank, a.status);
          why[a.rank] = a.why;
          log.push_back("finish " + std::to_string(a.rank));
          break;
        case HostAction::Kind::DropConnection:
          dropped.push_back(a.connection);
          log.push_back("drop " + std::to_string(a.connection));
          break;
      }
    }
  }
};

void answer(RemoteHostState& s, const ChannelOp& op, FakeChannel& ch, Job& job) {
  switch (op.kind) {
    case Kind::Read: {
      auto& chunks = op.stream == RankStream::Stdout ? ch.out : ch.err;
      if (op.stream == RankStream::Stdout && !ch.readError.empty()) {
        s.onReadFailed(op.rank, ch.readError);
      } else if (chunks.empty()) {
        s.onDrained(op.rank, op.stream);
      } else {
        std::string chunk = chunks.front();
        chunks.pop_front();
        s.onOutput(op.rank, op.stream, chunk);
        job.apply(s);  // `chunk` dies here
      }
      break;
    }
    case Kind::WriteLifeline:
      if (ch.lifelineBlocked) {
        s.onLifelineWouldBlock(op.rank);
      } else if (ch.lifelineRefused) {
        s.onLifelineRefused(op.rank);
      } else {
        std::size_t n = std::min(ch.writeLimit, op.data.size());
        ch.lifeline += std::string(op.data.substr(0, n));
        s.onLifelineWritten(op.rank, n);
      }
      break;
    case Kind::CheckEof:
      s.onEof(op.rank, ch.eof);
      break;
    case Kind::Close:
      s.onCloseSent(op.rank, ch.closeBlocks-- > 0);
      break;
    case Kind::WaitClosed:
      if (ch.waitBlocks-- > 0) {
        s.onStillClosing(op.rank);
      } else {
        ch.closed = true;
        s.onExit(op.rank, ch.status, ch.exitSignal);
      }
      break;
    case Kind::CheckQueued:
      s.onQueued(op.rank, ch.queued);
      break;
    default:
      break;
  }
  job.apply(s);
}

// Runs one round and returns how it ended, with the ops asked for ("read 0 out", ...).
Kind round(RemoteHostState& s, std::vector<FakeChannel>& channels, Job& job, HostTime now,
           std::vector<std::string>* ops = nullptr) {
  for (;;) {
    ChannelOp op = s.next(now);
    job.apply(s);
    if (op.kind == Kind::Again || op.kind == Kind::Sleep || op.kind == Kind::HostDone)
      return op.kind;
    if (ops)
      ops->push_back(std::to_string(static_cast<int>(op.kind)) + ":" + std::to_string(op.rank));
    answer(s, op, channels.at(op.rank), job);
  }
}

RemoteHostState started(std::size_t ranks, std::size_t perConnection = 8) {
  RemoteHostState s(ranks, perConnection);
  s.setWhere("host 'a' (port 22, user u): ");
  for (std::size_t i = 0; i < ranks; ++i) REQUIRE(s.startRank(i));
  REQUIRE(s.takeActions().empty());
  return s;
}

std::string opName(Kind k, std::size_t rank) {
  return std::to_string(static_cast<int>(k)) + ":" + std::to_string(rank);
}

}  // namespace

TEST_CASE("remote host: output is forwarded, then each rank ends with its exit status") {
  auto s = started(2);
  std::vector<FakeChannel> ch(2);
  Job job;
  ch[0].out = {"hello ", "world\n"};
  ch[0].err = {"warn\n"};
  CHECK(round(s, ch, job, t0) == Kind::Again);  // output moved
  CHECK(job.out[0] == "hello world\n");
  CHECK(job.err[0] == "warn\n");
  CHECK(job.ended.empty());

  CHECK(round(s, ch, job, t0) == Kind::Sleep);  // nothing moved, nothing queued
  ch[0].queued = true;
  CHECK(round(s, ch, job, t0) == Kind::Again);  // libssh2 holds data poll() cannot see
  ch[0].queued = false;

  ch[0].eof = ch[1].eof = true;
  ch[1].status = 3;
  CHECK(round(s, ch, job, t0) == Kind::HostDone);
  REQUIRE(job.ended.size() == 2);
  CHECK(job.ended[0].first == 0);
  CHECK_FALSE(job.ended[0].second.failed());
  CHECK(job.ended[1].second.code == 3);
  CHECK(job.why[0].empty());
  CHECK(s.done());
  CHECK(s.next(t0).kind == Kind::HostDone);
  CHECK(job.dropped.empty());
}

TEST_CASE("remote host: the remote shell's 128+N is signal N; a shell ended by a signal is 255") {
  auto s = started(3);
  std::vector<FakeChannel> ch(3);
  Job job;
  for (auto& c : ch) c.eof = true;
  ch[0].status = 137;
  ch[1].exitSignal = "TERM";
  ch[2].status = 128;  // not a signal: 128 itself is an exit code
  CHECK(round(s, ch, job, t0) == Kind::HostDone);
  REQUIRE(job.ended.size() == 3);
  CHECK(job.ended[0].second.signaled);
  CHECK(job.ended[0].second.code == SIGKILL);
  CHECK_FALSE(job.ended[1].second.signaled);
  CHECK(job.ended[1].second.code == 255);
  CHECK(job.why[1] == "the remote shell was ended by SIGTERM");
  CHECK_FALSE(job.ended[2].second.signaled);
  CHECK(job.ended[2].second.code == 128);
}

TEST_CASE("remote host: output read in the round of the EOF comes before the end; none after") {
  auto s = started(1);
  std::vector<FakeChannel> ch(1);
  Job job;
  ch[0].out = {"last words\n"};
  ch[0].eof = true;
  ch[0].waitBlocks = 1;  // the exit status is not there yet
  std::vector<std::string> ops;
  CHECK(round(s, ch, job, t0, &ops) == Kind::Again);
  CHECK(job.out[0] == "last words\n");
  CHECK(job.ended.empty());
  // Output that arrives now (after EOF, before the exit status) is never asked for.
  ch[0].out = {"late\n"};
  ops.clear();
  CHECK(round(s, ch, job, t0, &ops) == Kind::HostDone);
  CHECK(ops == std::vector<std::string>{opName(Kind::WaitClosed, 0)});
  CHECK(job.out[0] == "last words\n");
  CHECK(job.log == std::vector<std::string>{"forward 0", "finish 0"});
  // An outcome nothing asked for is a bug in the caller, not data to forward.
  CHECK_THROWS_AS(s.onOutput(0, RankStream::Stdout, "late\n"), hvd::InternalError);
}

TEST_CASE("remote host: close and wait that would block are retried in later rounds") {
  auto s = started(1);
  std::vector<FakeChannel> ch(1);
  Job job;
  ch[0].eof = true;
  ch[0].closeBlocks = 2;
  ch[0].status = 5;
  std::vector<std::string> ops;
  CHECK(round(s, ch, job, t0, &ops) == Kind::Sleep);  // a blocked close moves nothing
  CHECK(ops == std::vector<std::string>{opName(Kind::Read, 0), opName(Kind::Read, 0),
                                        opName(Kind::CheckEof, 0), opName(Kind::Close, 0)});
  ops.clear();
  CHECK(round(s, ch, job, t0, &ops) == Kind::Sleep);
  CHECK(ops == std::vector<std::string>{opName(Kind::Close, 0)});  // no reads once closing
  CHECK(round(s, ch, job, t0) == Kind::HostDone);
  REQUIRE(job.ended.size() == 1);
  CHECK(job.ended[0].second.code == 5);
}

TEST_CASE("remote host: a script that cannot be sent loses its connection and its ranks") {
  RemoteHostState s(10, 8);  // ranks 0-7 on connection 0, 8-9 on connection 1
  Job job;
  REQUIRE(s.startRank(0));
  s.onScriptFailed(0, "host 'a': cannot start the rank: broken pipe");
  job.apply(s);
  for (std::size_t i = 1; i < 8; ++i) CHECK_FALSE(s.startRank(i));
  CHECK(s.startRank(8));
  CHECK(s.startRank(9));
  job.apply(s);
  REQUIRE(job.ended.size() == 8);
  for (const auto& [rank, status] : job.ended) {
    CHECK(rank < 8);
    CHECK(status.code == 255);
    CHECK_FALSE(status.signaled);
    CHECK(job.why[rank] == "host 'a': cannot start the rank: broken pipe");
  }
  CHECK(job.dropped == std::vector<std::size_t>{0});
  CHECK(job.log.back() == "drop 0");  // the ranks are told before their channels go
  CHECK(s.connectionCount() == 2);
  CHECK_FALSE(s.done());
}

TEST_CASE("remote host: a read error mid-run ends every rank on that connection, once") {
  auto s = started(3, 2);  // ranks 0-1 on connection 0, rank 2 on connection 1
  std::vector<FakeChannel> ch(3);
  Job job;
  ch[1].out = {"partial"};
  ch[1].eof = true;
  ch[1].closeBlocks = 1;
  CHECK(round(s, ch, job, t0) == Kind::Again);  // rank 1 is closing, not yet ended
  ch[0].readError = "Failure while reading from the socket (libssh2 error -43)";
  std::vector<std::string> ops;
  CHECK(round(s, ch, job, t0, &ops) == Kind::Sleep);
  // Rank 1 is not touched after its connection went; rank 2 still runs.
  CHECK(ops == std::vector<std::string>{opName(Kind::Read, 0), opName(Kind::Read, 2),
                                        opName(Kind::Read, 2), opName(Kind::CheckEof, 2),
                                        opName(Kind::CheckQueued, 2)});
  REQUIRE(job.ended.size() == 2);
  for (std::size_t rank : {0, 1}) {
    CHECK(job.why[rank] ==
          "host 'a' (port 22, user u): ssh connection lost while rank was running: Failure "
          "while reading from the socket (libssh2 error -43)");
    CHECK(job.ended[rank].second.code == 255);
  }
  CHECK(job.out[1] == "partial");
  CHECK(job.dropped == std::vector<std::size_t>{0});
  // Another loss of the same connection changes nothing.
  s.onSocketEvents(0, false, true);
  job.apply(s);
  CHECK(job.ended.size() == 2);
  CHECK(job.dropped.size() == 1);
}

TEST_CASE("remote host: a socket hang-up loses the connection unless data is left to read") {
  auto s = started(2, 1);
  Job job;
  s.onSocketEvents(0, true, true);  // readable: the exit status may be in it
  s.onSocketEvents(1, false, false);
  job.apply(s);
  CHECK(job.ended.empty());
  s.onSocketEvents(1, false, true);
  job.apply(s);
  REQUIRE(job.ended.size() == 1);
  CHECK(job.ended[0].first == 1);
  CHECK(job.why[1] == "host 'a' (port 22, user u): ssh connection lost while rank was running");
  CHECK(job.dropped == std::vector<std::size_t>{1});
}

TEST_CASE("remote host: a failed poll ends every rank still running, on every connection") {
  auto s = started(10);
  std::vector<FakeChannel> ch(10);
  Job job;
  ch[3].eof = true;
  CHECK(round(s, ch, job, t0) == Kind::Again);  // rank 3 ended normally
  s.onPollFailed();
  job.apply(s);
  REQUIRE(job.ended.size() == 10);
  for (const auto& [rank, status] : job.ended)
    if (rank != 3) {
      CHECK(status.code == 255);
      CHECK(job.why[rank] == "hvdrun cannot watch its ssh connections: poll failed");
    }
  CHECK(job.dropped == std::vector<std::size_t>{0, 1});
  CHECK(s.next(t0).kind == Kind::HostDone);
}

TEST_CASE("remote host: term, then kill, each written once; an unconfirmed kill counts at 2 s") {
  auto s = started(1);
  std::vector<FakeChannel> ch(1);
  Job job;
  s.onSignal(0, SIGTERM, t0);
  s.onSignal(0, SIGTERM, t0);  // repeated: nothing more to write
  CHECK(round(s, ch, job, t0) == Kind::Again);
  CHECK(ch[0].lifeline == "term\n");
  CHECK(round(s, ch, job, t0) == Kind::Sleep);

  const HostTime killedAt = t0 + seconds(5);
  s.onSignal(0, SIGKILL, killedAt);
  CHECK(s.pollTimeoutMs(killedAt, {}) == 2000);
  CHECK(s.pollTimeoutMs(killedAt + milliseconds(1500), {10}) == 500);
  CHECK(round(s, ch, job, killedAt) == Kind::Again);
  CHECK(ch[0].lifeline == "term\nkill\n");
  CHECK(round(s, ch, job, killedAt + milliseconds(1999)) == Kind::Sleep);
  CHECK(job.ended.empty());
  CHECK(s.pollTimeoutMs(killedAt + seconds(3), {}) == 0);  // overdue: do not sleep

  std::vector<std::string> ops;
  ch[0].waitBlocks = 1;  // the host has not answered the close yet
  CHECK(round(s, ch, job, killedAt + seconds(2), &ops) == Kind::Sleep);
  REQUIRE(job.ended.size() == 1);
  CHECK(job.ended[0].second.signaled);
  CHECK(job.ended[0].second.code == SIGKILL);
  CHECK(job.why[0] == "no exit from the remote host within 2 s of the kill; counted as killed");
  // The channel is closed in the background; it no longer keeps the poll short.
  CHECK(ops.front() == opName(Kind::Close, 0));
  CHECK(s.pollTimeoutMs(killedAt + seconds(3), {}) == 10000);
  // Its exit status, when it comes, is not reported again.
  ch[0].status = 137;
  CHECK(round(s, ch, job, killedAt + seconds(3)) == Kind::HostDone);
  CHECK(job.ended.size() == 1);
}

TEST_CASE("remote host: a kill the host confirms in time reports the remote status") {
  auto s = started(1);
  std::vector<FakeChannel> ch(1);
  Job job;
  s.onSignal(0, SIGKILL, t0);
  CHECK(round(s, ch, job, t0) == Kind::Again);
  CHECK(ch[0].lifeline == "kill\n");
  // A repeated kill neither writes `kill` again nor moves the deadline.
  s.onSignal(0, SIGKILL, t0 + milliseconds(1500));
  CHECK(s.pollTimeoutMs(t0 + milliseconds(1500), {}) == 500);
  CHECK(round(s, ch, job, t0 + milliseconds(1500)) == Kind::Again);
  CHECK(ch[0].lifeline.find("kill\n", 1) == std::string::npos);
  ch[0].eof = true;
  ch[0].status = 128 + SIGKILL;
  CHECK(round(s, ch, job, t0 + milliseconds(300)) == Kind::HostDone);
  REQUIRE(job.ended.size() == 1);
  CHECK(job.ended[0].second.code == SIGKILL);
  CHECK(job.why[0].empty());
}

TEST_CASE("remote host: lifeline writes may be partial, blocked or refused") {
  auto s = started(1);
  std::vector<FakeChannel> ch(1);
  Job job;
  s.onSignal(0, SIGTERM, t0);
  ch[0].lifelineBlocked = true;
  CHECK(round(s, ch, job, t0) == Kind::Sleep);  // a blocked write moves nothing
  CHECK(ch[0].lifeline.empty());
  ch[0].lifelineBlocked = false;
  ch[0].writeLimit = 2;
  CHECK(round(s, ch, job, t0) == Kind::Again);
  CHECK(ch[0].lifeline == "te");
  CHECK(round(s, ch, job, t0) == Kind::Again);  // one write per round
  CHECK(ch[0].lifeline == "term");
  s.onSignal(0, SIGKILL, t0);
  ch[0].lifelineRefused = true;  // the remote side closed stdin: the rank is ending anyway
  CHECK(round(s, ch, job, t0) == Kind::Sleep);
  ch[0].lifelineRefused = false;
  std::vector<std::string> ops;
  CHECK(round(s, ch, job, t0, &ops) == Kind::Sleep);
  CHECK(std::find(ops.begin(), ops.end(), opName(Kind::WriteLifeline, 0)) == ops.end());
  CHECK(ch[0].lifeline == "term");
}

TEST_CASE("remote host: a signal in the middle of a round is written in that round") {
  auto s = started(2);
  std::vector<FakeChannel> ch(2);
  Job job;
  ChannelOp op = s.next(t0);
  REQUIRE(op.kind == Kind::Read);
  REQUIRE(op.rank == 0);
  s.onSignal(1, SIGTERM, t0);  // the job's request lands while rank 0 is being read
  s.onSignal(0, SIGTERM, t0);  // rank 0's turn is past nothing yet: written now too
  answer(s, op, ch[0], job);
  CHECK(round(s, ch, job, t0) == Kind::Again);
  CHECK(ch[0].lifeline == "term\n");
  CHECK(ch[1].lifeline == "term\n");
}

TEST_CASE("remote host: a rank stopped before its script went out never starts") {
  RemoteHostState s(3, 8);
  Job job;
  s.onSignal(1, SIGKILL, t0);
  s.onSignal(2, SIGTERM, t0);
  CHECK(s.startRank(0));
  CHECK_FALSE(s.startRank(1));
  CHECK_FALSE(s.startRank(2));
  job.apply(s);
  REQUIRE(job.ended.size() == 2);
  CHECK(job.ended[0].second.signaled);
  CHECK(job.ended[0].second.code == SIGKILL);
  CHECK(job.ended[1].second.code == SIGTERM);
  CHECK(job.why[1].empty());
  // Their channels are closed without a command on the lifeline or a second report, and no
  // unconfirmed kill keeps the poll short.
  CHECK(s.pollTimeoutMs(t0, {}) == 10000);
  std::vector<FakeChannel> ch(3);
  ch[0].eof = true;
  std::vector<std::string> ops;
  CHECK(round(s, ch, job, t0 + seconds(10), &ops) == Kind::HostDone);
  CHECK(ops == std::vector<std::string>{opName(Kind::Read, 0), opName(Kind::Read, 0),
                                        opName(Kind::CheckEof, 0), opName(Kind::Close, 0),
                                        opName(Kind::WaitClosed, 0), opName(Kind::Close, 1),
                                        opName(Kind::WaitClosed, 1), opName(Kind::Close, 2),
                                        opName(Kind::WaitClosed, 2)});
  CHECK(ch[1].lifeline.empty());
  CHECK(job.ended.size() == 3);
}

TEST_CASE("remote host: a late host's failed check ends its ranks unstarted, or as signalled") {
  SECTION("failed") {
    RemoteHostState s(2, 8);
    Job job;
    s.onCheckFailed("host 'b': connection refused", false);
    job.apply(s);
    REQUIRE(job.ended.size() == 2);
    CHECK(job.ended[1].second.unstarted);
    CHECK(job.ended[1].second.code == 255);
    CHECK(job.why[1] == "host 'b': connection refused");
    CHECK(s.done());
  }
  SECTION("interrupted by the job's signals") {
    RemoteHostState s(2, 8);
    Job job;
    s.onSignal(0, SIGKILL, t0);
    s.onSignal(1, SIGTERM, t0);
    s.onCheckFailed("host 'b': the check was interrupted", true);
    job.apply(s);
    REQUIRE(job.ended.size() == 2);
    CHECK_FALSE(job.ended[0].second.unstarted);
    CHECK(job.ended[0].second.code == SIGKILL);
    CHECK(job.ended[1].second.code == SIGTERM);
    CHECK(job.why[0].empty());
  }
}

TEST_CASE("remote host: the sleep ends at the next keepalive, never sooner than 1 s for it") {
  auto s = started(1);
  CHECK(s.pollTimeoutMs(t0, {}) == 10000);
  CHECK(s.pollTimeoutMs(t0, {10, 4}) == 4000);
  CHECK(s.pollTimeoutMs(t0, {0}) == 1000);  // libssh2 says "now": it has just sent one
}
