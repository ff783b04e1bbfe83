// The engine's heartbeat protocol (liveness.h): its own signs of life, and the peers' read from
// inside a long collective's waits, where a silent peer or a relayed failure ends it.
#include "common/error.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/scoped_flag.h"

namespace hvd::runtime {

using Clock = std::chrono::steady_clock;

void Engine::heartbeat() {
  if (inHeartbeat_ || !liveness_.heartbeatDue(Clock::now())) return;
  ScopedFlag sending(inHeartbeat_);
  if (coordinator_) {
    ResponseList beat;
    beat.seq = ResponseList::kHeartbeatSeq;
    std::string bytes = beat.encode();
    for (int peer = 1; peer < size_; ++peer) control_->send(peer, bytes);
  } else {
    RequestList beat;
    beat.responseListsSeen = listsSeen_;
    control_->send(0, beat.encode());
  }
}

void Engine::pulseInCollective() {
  heartbeat();
  if (!liveness_.enabled()) return;
  // What arrives meanwhile is kept for readControl, in order; only heard and looked at here:
  // a peer that stopped, or rank 0 saying the job failed, ends this collective now instead of
  // at its timeout.
  auto now = Clock::now();
  for (auto& [peer, bytes] : control_->receive()) {
    liveness_.heard(peer, now);
    if (!coordinator_) {
      for (const auto& r : ResponseList::decode(bytes).responses)
        if (r.kind == ResponseKind::Fatal) throw PeerLost(r.message);
    }
    heardInCollective_.emplace_back(peer, std::move(bytes));
  }
  checkLiveness();
}

void Engine::checkLiveness() {
  auto silent = liveness_.silentPeer(Clock::now(), [this](int peer) {
    return coordinator_ && coordinator_->shutdownRequested(peer);
  });
  // The silent peer is the cause: this rank's failure is not its own (failure_reports.h).
  if (silent) throw PeerLost(*silent);
}

}  // namespace hvd::runtime
