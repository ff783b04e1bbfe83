// The engine's heartbeat protocol around Liveness (liveness.h): when this rank's sign of life
// is due and what it says (rank 0 sends an empty response list to every rank, the others an
// empty request list to rank 0), what the peers said while a long collective ran, and the
// silent peer. No I/O: the engine sends what due() returns and passes in what it received.
// Engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine/liveness.h"

namespace hvd::runtime {

class Heartbeats {
 public:
  using Time = Liveness::Time;
  using Messages = std::vector<std::pair<int, std::string>>;

  // `timeout` zero: no heartbeats, nothing watched. `hostOfRank` names hosts in messages.
  Heartbeats(int rank, int size, std::chrono::milliseconds timeout,
             std::vector<std::string> hostOfRank);

  bool enabled() const { return liveness_.enabled(); }
  void start(Time now) { liveness_.start(now); }
  void heard(int peer, Time now) { liveness_.heard(peer, now); }

  struct Beat {
    std::string message;
    std::vector<int> peers;
  };
  // The heartbeat to send now, or nothing: none is due, or one is being sent (a send that
  // waits runs the collective's pulse, which must not start another). `listsSeen` is the
  // newest response list this rank has applied.
  std::optional<Beat> due(Time now, uint64_t listsSeen);
  // Set for the scope of sending a beat, and of running a collective (whose waits pulse).
  bool& sending() { return sending_; }
  bool& inCollective() { return inCollective_; }

  // Messages that arrived inside a collective: each peer counts as heard, and the messages
  // are kept, in order, for the engine's next read of its control link. Rank 0 relaying the
  // job's failure throws PeerLost now, ending the collective instead of letting it time out.
  void heardInCollective(Messages messages, Time now);
  Messages takeHeardInCollective();
  bool heardAnyInCollective() const { return !heardInCollective_.empty(); }

  // Throws PeerLost naming a watched peer silent for the timeout; `exempt` peers (those that
  // asked rank 0 to shut down, and may have left) are not judged.
  void check(Time now, const std::function<bool(int)>& exempt) const;

 private:
  int rank_;
  int size_;
  Liveness liveness_;
  bool sending_ = false;
  bool inCollective_ = false;
  Messages heardInCollective_;
};

}  // namespace hvd::runtime
