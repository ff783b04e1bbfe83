// The lifecycle of one remote host's ranks, as a state machine with no I/O: RemoteRanks' host
// thread (remote_ranks.cc) performs the channel operations this asks for, feeds back what
// happened, and carries out the actions it returns. Nothing here touches libssh2, a socket or
// a clock, so every decision below is tested on made-up events (test/unit/test_remote_host.cc).
//   - Start: a rank the job signalled before its script went out never starts (it ends with
//     that signal); the others are sent their script. A failed send loses the whole connection.
//   - Pumping, in rounds over the ranks in order: a running rank's stdout, then stderr, are read
//     until nothing is left and forwarded; then its queued lifeline commands are written; at EOF
//     its channel is closed, and once closed its exit status ends it (128+N as signal N, as the
//     remote shell reports it; a shell itself ended by a signal as 255 with the reason). A round
//     in which nothing moved and libssh2 holds nothing poll() cannot see ends in a sleep.
//   - Signals: SIGKILL queues `kill` on the lifeline, any other `term`, each once. A killed rank
//     ends when its remote script exits; a host that does not confirm within kKillConfirmTime
//     has the rank counted killed anyway (its channel is still closed in the background).
//   - A lost connection (read error, socket error or hang-up, failed send, failed poll) ends
//     every rank on it not yet ended with status 255 and the reason on its stderr.
//   - Every rank is reported exactly once; the host is done when every rank has ended.
// Rank i runs on connection i / ranksPerConnection (ssh_preflight.h).
// Thread model: owned by one host thread; not thread-safe. Time is passed in.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/exit_status.h"

namespace hvd::launcher {

using HostTime = std::chrono::steady_clock::time_point;

// How long a host has to confirm a kill (the rank's remote script exits once the watcher has
// killed the group) before the rank is counted killed anyway.
inline constexpr std::chrono::seconds kKillConfirmTime{2};
// Keepalive interval on a host's connections, and the longest a host thread sleeps.
inline constexpr int kKeepaliveSeconds = 10;

enum class RankStream { Stdout, Stderr };

// What the caller does for the state machine, in the order returned.
struct HostAction {
  enum class Kind {
    Forward,         // write `data` to the rank's `stream`
    Finish,          // the rank ended: write "hvdrun: <why>\n" on its stderr unless `why` is
                     // empty, close both its streams, report `status` (once per rank, ever)
    DropConnection,  // free `connection` and with it its channels; never asked for again
  };
  Kind kind = Kind::Finish;
  std::size_t rank = 0;
  std::size_t connection = 0;
  RankStream stream = RankStream::Stdout;
  std::string_view data;  // Forward: the bytes passed to onOutput, valid as long as they are
  ExitStatus status;
  std::string why;
};

// The next channel operation of the current round, from next(). The caller performs it and
// reports the outcome with the method named, before calling next() again.
struct ChannelOp {
  enum class Kind {
    Read,           // read `stream` of `rank`: onOutput, onDrained or onReadFailed
    WriteLifeline,  // write `data` on `rank`'s stdin: onLifelineWritten/WouldBlock/Refused
    CheckEof,       // has the remote side sent EOF: onEof
    Close,          // send the channel close: onCloseSent
    WaitClosed,     // has the close been answered: onStillClosing, or onExit with its status
    CheckQueued,    // does libssh2 hold data or EOF poll() cannot see: onQueued
    // The round is over; neither has an outcome.
    Again,     // something moved: apply the job's requests and start the next round now
    Sleep,     // nothing moved: sleep until pollTimeoutMs() passes or a socket or the job wakes
    HostDone,  // every rank has ended; next() says so from now on
  };
  Kind kind = Kind::HostDone;
  std::size_t rank = 0;
  RankStream stream = RankStream::Stdout;
  std::string_view data;  // WriteLifeline: valid until the next call
};

class RemoteHostState {
 public:
  RemoteHostState(std::size_t ranks, std::size_t ranksPerConnection);

  std::size_t rankCount() const { return ranks_.size(); }
  std::size_t connectionCount() const { return connections_; }
  std::size_t connectionOf(std::size_t rank) const;
  // "host 'a' (a port 22, user u): ", the prefix of the reasons this makes for lost connections.
  void setWhere(std::string where) { where_ = std::move(where); }

  // The actions the calls since the last take asked for, in order.
  std::vector<HostAction> takeActions();

  // The job asked to signal the rank (at any time, in any phase).
  void onSignal(std::size_t rank, int sig, HostTime now);

  // A late host's check failed, or was interrupted (`stopped`): every rank ends unstarted with
  // `why`, or, stopped, with the signal the job asked for and no message.
  void onCheckFailed(const std::string& why, bool stopped);

  // Start, once per rank in order: true when its script is to be sent now.
  bool startRank(std::size_t rank);
  // Sending the rank's script failed with `why` (naming the host): its connection is lost.
  void onScriptFailed(std::size_t rank, const std::string& why);

  // The next operation of the current round; a round starts with the first call after the last
  // ended. `now` decides whether a kill went unconfirmed for too long.
  ChannelOp next(HostTime now);
  void onOutput(std::size_t rank, RankStream stream, std::string_view bytes);
  void onDrained(std::size_t rank, RankStream stream);
  // `why`: libssh2's error in words (its message and code), for the message.
  void onReadFailed(std::size_t rank, const std::string& why);
  void onLifelineWritten(std::size_t rank, std::size_t bytes);
  void onLifelineWouldBlock(std::size_t rank);
  void onLifelineRefused(std::size_t rank);  // the remote side closed: the rank is ending anyway
  void onEof(std::size_t rank, bool eof);
  void onCloseSent(std::size_t rank, bool wouldBlock);
  void onStillClosing(std::size_t rank);
  // The channel closed with the remote shell's exit status, or, with `exitSignal` set ("TERM"),
  // ended by that signal itself.
  void onExit(std::size_t rank, int status, const std::string& exitSignal);
  void onQueued(std::size_t rank, bool queued);

  // While sleeping: how long, given each live connection's seconds to its next keepalive.
  int pollTimeoutMs(HostTime now, const std::vector<int>& keepaliveNextSeconds) const;
  // What poll() said about a connection's socket: an error or hang-up with nothing to read
  // loses it.
  void onSocketEvents(std::size_t connection, bool readable, bool errorOrHangup);
  // poll() itself failed: nothing can be watched, so every connection is lost.
  void onPollFailed();

  bool done() const;

 private:
  enum class Phase { Running, Closing, WaitClosed, Done };
  // Where next() is within the current rank's turn of a round.
  enum class Step { Begin, ReadOut, ReadErr, Write, Eof, Close, Wait, Queued };

  struct Rank {
    std::size_t connection = 0;
    Phase phase = Phase::Running;
    std::string lifeline;  // commands for the remote watcher not yet written
    bool termQueued = false, killWanted = false, reported = false;
    HostTime killConfirmBy{};  // killWanted: when to stop waiting for the remote exit
  };

  void finish(std::size_t rank, ExitStatus status, std::string why);
  void loseConnection(std::size_t connection, const std::string& why);
  void expect(std::size_t rank, Step step) const;  // the outcome answers the pending op
  void nextRank();
  void beginTurn(HostTime now);
  std::optional<ChannelOp> stepOp(HostTime now);
  ChannelOp op(ChannelOp::Kind kind, RankStream stream = RankStream::Stdout,
               std::string_view data = {}) const;
  std::nullopt_t skipTo(Step step);

  std::vector<Rank> ranks_;
  std::size_t connections_;
  std::vector<bool> dropped_;  // connections whose DropConnection was asked for
  std::string where_;
  std::vector<HostAction> actions_;
  // The current round: whose turn, how far it got, and whether anything moved or waits unseen.
  bool inRound_ = false;
  std::size_t cursor_ = 0;
  Step step_ = Step::Begin;
  bool progressed_ = false, pending_ = false;
};

// The remote shell reports a command killed by signal N as 128+N.
ExitStatus fromRemoteStatus(int status);

}  // namespace hvd::launcher
