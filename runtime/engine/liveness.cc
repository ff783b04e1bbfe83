#include "runtime/engine/liveness.h"

#include "common/error.h"
#include "runtime/engine/host_layout.h"

namespace hvd::runtime {

Liveness::Liveness(int rank, int size, std::chrono::milliseconds timeout,
                   std::vector<std::string> hostOfRank)
    : rank_(rank),
      size_(size),
      hostOfRank_(std::move(hostOfRank)),
      timeout_(timeout),
      lastHeard_(static_cast<std::size_t>(size)) {}

void Liveness::start(Time now) {
  lastHeard_.assign(lastHeard_.size(), now);
  nextHeartbeat_ = now;
}

void Liveness::heard(int peer, Time now) {
  if (peer >= 0 && peer < size_) lastHeard_[static_cast<std::size_t>(peer)] = now;
}

bool Liveness::heartbeatDue(Time now) {
  if (!enabled() || now < nextHeartbeat_) return false;
  nextHeartbeat_ = now + kInterval;
  return true;
}

std::optional<std::string> Liveness::silentPeer(Time now,
                                                const std::function<bool(int)>& exempt) const {
  if (!enabled()) return std::nullopt;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || (rank_ != 0 && peer != 0) || (exempt && exempt(peer))) continue;
    auto silent = now - lastHeard_[static_cast<std::size_t>(peer)];
    if (silent < timeout_) continue;
    return detail::concat(
        "rank ", rank_, "/", size_, ": rank ", peer, onHosts(hostOfRank_, {peer}),
        " has sent nothing for ", std::chrono::duration_cast<std::chrono::seconds>(silent).count(),
        " s although every engine sends a sign of life each second, also inside collectives: "
        "its process is stopped (SIGSTOP, a debugger, a paused job), hung in the kernel, or "
        "cut off from this rank (HVD_LIVENESS_TIMEOUT_SECONDS)");
  }
  return std::nullopt;
}

}  // namespace hvd::runtime
