#include "collectives/transport/wait_policy.h"

#include <algorithm>

namespace hvd::collectives {

std::chrono::microseconds SpinPolicy::spinFor(bool latencyBound) const {
  if (latencyBound) return smallSpin;
  if (blockedCallers && blockedCallers->load(std::memory_order_relaxed) > 0)
    return std::max(smallSpin, largeSpin);
  return largeSpin;
}

}  // namespace hvd::collectives
