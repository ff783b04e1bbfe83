#include "collectives/transport/request.h"

#include <algorithm>

#include "common/error.h"

namespace hvd::collectives {

void Request::wait(Deadline deadline) {
  if (!state_) return;
  while (!state_->done) {
    if (Clock::now() >= deadline)
      throw TimeoutError(state_->description() + ": timed out (the peer stopped or is too slow; "
                                               "HVD_OP_TIMEOUT sets the limit)");
    engine_->progressUntil(deadline, state_->bytes <= kLatencyBoundBytes);
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

std::chrono::microseconds SpinPolicy::spinFor(bool latencyBound) const {
  if (latencyBound) return smallSpin;
  if (blockedCallers && blockedCallers->load(std::memory_order_relaxed) > 0)
    return std::max(smallSpin, largeSpin);
  return largeSpin;
}

bool Request::test() const {
  if (!state_) return true;
  if (state_->done && state_->error) std::rethrow_exception(state_->error);
  return state_->done;
}

}  // namespace hvd::collectives
