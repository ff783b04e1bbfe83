// Which peers an engine has heard from lately, and when its own sign of life is due
// (HVD_LIVENESS_TIMEOUT_SECONDS). No I/O: the engine passes the time in, sends the heartbeats
// and reports the silent peer. Rank 0 watches every rank, the others watch rank 0 (which
// reports the rest). Engine thread only.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hvd::runtime {

class Liveness {
 public:
  using Time = std::chrono::steady_clock::time_point;
  static constexpr std::chrono::milliseconds kInterval{1000};  // between heartbeats

  // `timeout` zero: nothing is watched and no heartbeat is due.
  // `hostOfRank`: every rank's host name, for the message; empty: unknown.
  Liveness(int rank, int size, std::chrono::milliseconds timeout,
           std::vector<std::string> hostOfRank = {});

  bool enabled() const { return timeout_.count() > 0 && size_ > 1; }
  // Everyone counts as just heard from (the engine thread starts).
  void start(Time now);
  void heard(int peer, Time now);
  // True once per interval: then this rank sends its heartbeat.
  bool heartbeatDue(Time now);
  // The message naming a watched peer silent for the timeout, or nothing. `exempt` peers
  // (rank 0's: those that asked to shut down, and may have left) are not judged.
  std::optional<std::string> silentPeer(Time now, const std::function<bool(int)>& exempt) const;

 private:
  int rank_;
  int size_;
  std::vector<std::string> hostOfRank_;
  std::chrono::milliseconds timeout_;
  std::vector<Time> lastHeard_;
  Time nextHeartbeat_{};
};

}  // namespace hvd::runtime
