#include "collectives/transport/comm.h"

namespace hvd::collectives {

Comm::Comm(int rank, int size, std::vector<std::shared_ptr<Connection>> connections,
           std::chrono::milliseconds timeout, std::shared_ptr<ProgressEngine> progress)
    : rank_(rank),
      size_(size),
      connections_(std::move(connections)),
      timeout_(timeout),
      progress_(std::move(progress)) {
  HVD_ENFORCE_EQ(static_cast<int>(connections_.size()), size_);
}

Comm::~Comm() {
  hierarchy_.reset();  // `cross` shares this Comm's connections
  if (ownsConnections_)
    for (auto& c : connections_)
      if (c) c->close();
  connections_.clear();
}

Connection& Comm::peer(int r) {
  HVD_ENFORCE(r >= 0 && r < size_ && r != rank_, describe(), ": no connection to rank ", r);
  HVD_ENFORCE(connections_[r], describe(), ": no link to rank ", r,
              " (this communicator links only the pairs its LinkShape asked for)");
  return *connections_[r];
}

std::byte* Comm::KeptBuffer::atLeast(std::size_t size) {
  if (size > bytes) {
    data.reset();  // before allocating, so the old and new never coexist
    data = std::make_unique_for_overwrite<std::byte[]>(size);
    bytes = size;
  }
  return data.get();
}

std::unique_ptr<Comm> Comm::subset(const std::vector<int>& ranks) const {
  std::vector<std::shared_ptr<Connection>> links;
  int self = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    HVD_ENFORCE(ranks[i] >= 0 && ranks[i] < size_, describe(), ": subset rank ", ranks[i],
                " outside [0, ", size_, ")");
    HVD_ENFORCE(i == 0 || ranks[i] > ranks[i - 1], describe(), ": subset ranks not sorted");
    if (ranks[i] == rank_) self = static_cast<int>(i);
    links.push_back(connections_[ranks[i]]);
  }
  HVD_ENFORCE(self >= 0, describe(), ": subset does not contain this rank");
  auto sub = std::make_unique<Comm>(self, static_cast<int>(ranks.size()), std::move(links),
                                    timeout_, progress_);
  sub->ownsConnections_ = false;
  sub->pipelineSegmentBytes_ = pipelineSegmentBytes_;
  sub->buffersPerPeer_ = buffersPerPeer_;
  sub->linkName_ = linkName_;
  return sub;
}

void Comm::setHierarchy(Hierarchy h) {
  HVD_ENFORCE(h.local && h.cross, describe(), ": a hierarchy needs both communicators");
  HVD_ENFORCE_EQ(h.local->size() * h.cross->size(), size_);
  HVD_ENFORCE_EQ(static_cast<int>(h.hosts.size()), h.cross->size());
  for (const auto& ranks : h.hosts) HVD_ENFORCE_EQ(static_cast<int>(ranks.size()), h.local->size());
  hierarchy_ = std::make_unique<Hierarchy>(std::move(h));
}

std::string Comm::describe() const { return detail::concat("rank ", rank_, "/", size_); }

}  // namespace hvd::collectives
