#include "runtime/engine/heartbeats.h"

#include "common/error.h"
#include "runtime/engine/messages.h"

namespace hvd::runtime {

Heartbeats::Heartbeats(int rank, int size, std::chrono::milliseconds timeout,
                       std::vector<std::string> hostOfRank)
    : rank_(rank), size_(size), liveness_(rank, size, timeout, std::move(hostOfRank)) {}

std::optional<Heartbeats::Beat> Heartbeats::due(Time now, uint64_t listsSeen) {
  if (sending_ || !liveness_.heartbeatDue(now)) return std::nullopt;
  Beat beat;
  if (rank_ == 0) {
    ResponseList list;
    list.seq = ResponseList::kHeartbeatSeq;
    beat.message = list.encode();
    for (int peer = 1; peer < size_; ++peer) beat.peers.push_back(peer);
  } else {
    RequestList list;
    list.responseListsSeen = listsSeen;
    beat.message = list.encode();
    beat.peers.push_back(0);
  }
  return beat;
}

void Heartbeats::heardInCollective(Messages messages, Time now) {
  for (auto& [peer, bytes] : messages) {
    liveness_.heard(peer, now);
    if (rank_ != 0)
      for (const auto& r : ResponseList::decode(bytes).responses)
        if (r.kind == ResponseKind::Fatal) throw PeerLost(r.message);
    heardInCollective_.emplace_back(peer, std::move(bytes));
  }
}

Heartbeats::Messages Heartbeats::takeHeardInCollective() {
  Messages taken;
  taken.swap(heardInCollective_);
  return taken;
}

void Heartbeats::check(Time now, const std::function<bool(int)>& exempt) const {
  // The silent peer is the cause: this rank's failure is not its own (failure_reports.h).
  if (auto silent = liveness_.silentPeer(now, exempt)) throw PeerLost(*silent);
}

}  // namespace hvd::runtime
