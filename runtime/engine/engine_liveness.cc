// The engine's side of the heartbeat protocol (heartbeats.h): its control link carries the
// beats, and a long collective's waits hear the peers.
#include "runtime/engine/engine.h"
#include "runtime/engine/scoped_flag.h"

namespace hvd::runtime {

using Clock = std::chrono::steady_clock;

void Engine::heartbeat() {
  auto beat = heartbeats_.due(Clock::now(), listsSeen_);
  if (!beat) return;
  ScopedFlag sending(heartbeats_.sending());
  for (int peer : beat->peers) control_->send(peer, beat->message);
}

void Engine::pulseInCollective() {
  heartbeat();
  if (!heartbeats_.enabled()) return;
  heartbeats_.heardInCollective(control_->receive(), Clock::now());
  checkLiveness();
}

void Engine::checkLiveness() {
  heartbeats_.check(Clock::now(), [this](int peer) {
    return coordinator_ && coordinator_->shutdownRequested(peer);
  });
}

}  // namespace hvd::runtime
