#include "collectives/transport/request.h"

#include <algorithm>

#include "common/error.h"
#include "common/logging.h"

namespace hvd::collectives {

namespace {

// How often a watched wait looks at its transfer's progress, and calls its thread's pulse.
constexpr std::chrono::milliseconds kStallLook{1000};

thread_local const std::function<void()>* tPulse = nullptr;  // the live WaitPulse's
thread_local Clock::time_point tNextPulse{};

std::string stalledFor(const RequestState& s, Clock::duration idle) {
  return detail::concat(s.description(), ": no data moved for ",
                        std::chrono::duration_cast<std::chrono::seconds>(idle).count(), " s (",
                        s.moved, " of ", s.bytes, " bytes done)",
                        s.describer ? s.describer->peerState() : std::string());
}

}  // namespace

const StallWatch& ProgressEngine::stallWatch() const {
  static const StallWatch kNone{};  // immutable: no limits
  return kNone;
}

WaitPulse::WaitPulse(std::function<void()> pulse) : pulse_(std::move(pulse)) {
  tPulse = &pulse_;
  tNextPulse = coarseNow() + kStallLook;
}

void pulseIfDue() {
  if (!tPulse) return;
  auto now = coarseNow();
  if (now < tNextPulse) return;
  tNextPulse = now + kStallLook;
  (*tPulse)();
}

WaitPulse::~WaitPulse() { tPulse = nullptr; }

void Request::wait(Deadline deadline) {
  if (!state_) return;
  if (!state_->done) waitForCompletion(deadline);
  if (state_->error) std::rethrow_exception(state_->error);
}

void Request::waitForCompletion(Deadline deadline) {
  const bool latencyBound = state_->bytes <= kLatencyBoundBytes;
  const StallWatch& watch = engine_->stallWatch();
  const bool watched = watch.warnAfter.count() > 0 || watch.failAfter.count() > 0 ||
                       watch.stoppedPeerAfter.count() > 0 || tPulse != nullptr;

  auto lastMove = coarseNow();
  std::size_t lastMoved = state_->moved;
  bool warned = false;
  while (!state_->done) {
    auto now = coarseNow();
    if (now >= deadline)
      throw TimeoutError(state_->description() +
                         ": timed out (the peer stopped or is too slow; "
                         "HVD_OP_TIMEOUT sets the limit)");
    if (!watched) {
      engine_->progressUntil(deadline, latencyBound);
      continue;
    }
    if (state_->moved != lastMoved) {
      lastMoved = state_->moved;
      lastMove = now;
      warned = false;
    }
    pulseIfDue();
    auto idle = now - lastMove;
    if (watch.failAfter.count() > 0 && idle >= watch.failAfter)
      throw TimeoutError(stalledFor(*state_, idle) +
                         ", stopping (HVD_STALL_SHUTDOWN_TIME_SECONDS)");
    if (watch.stoppedPeerAfter.count() > 0 && idle >= watch.stoppedPeerAfter && state_->describer &&
        state_->describer->peerStopped())
      throw PeerLost(stalledFor(*state_, idle) + ", stopping (HVD_LIVENESS_TIMEOUT_SECONDS)");
    if (watch.warnAfter.count() > 0 && idle >= watch.warnAfter && !warned) {
      warned = true;
      log::logger(watch.logs.get(), "engine")
          ->warn("stall: {} (HVD_STALL_CHECK_TIME_SECONDS)", stalledFor(*state_, idle));
    }
    engine_->progressUntil(std::min(deadline, now + kStallLook), latencyBound);
  }
}

bool Request::test() const {
  if (!state_) return true;
  if (state_->done && state_->error) std::rethrow_exception(state_->error);
  return state_->done;
}

}  // namespace hvd::collectives
