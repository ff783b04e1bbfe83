#include "collectives/transport/comm.h"

namespace hvd::collectives {

Comm::Comm(int rank, int size, std::vector<std::shared_ptr<Connection>> connections,
           std::chrono::milliseconds timeout, std::shared_ptr<void> keepAlive)
    : rank_(rank),
      size_(size),
      connections_(std::move(connections)),
      timeout_(timeout),
      keepAlive_(std::move(keepAlive)) {
  HVD_ENFORCE_EQ(static_cast<int>(connections_.size()), size_);
}

Comm::~Comm() {
  for (auto& c : connections_)
    if (c) c->close();
  connections_.clear();
}

Connection& Comm::peer(int r) {
  HVD_ENFORCE(r >= 0 && r < size_ && r != rank_, describe(), ": no connection to rank ", r);
  return *connections_[r];
}

std::byte* Comm::scratch(std::size_t bytes) {
  if (bytes > scratchBytes_) {
    scratch_.reset(new std::byte[bytes]);
    scratchBytes_ = bytes;
  }
  return scratch_.get();
}

std::string Comm::describe() const { return detail::concat("rank ", rank_, "/", size_); }

}  // namespace hvd::collectives
