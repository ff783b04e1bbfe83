// One peer of a Comm, after Gloo's transport::Pair. Messages on a connection are matched in
// order: the n-th receive posted gets the n-th message sent by the peer, and its tag and size
// must match (a mismatch is an InternalError: the ranks disagree on the algorithm).
// Thread model: used only by the thread that owns the Comm.
#pragma once

#include <cstdint>
#include <string>

#include "collectives/transport/bytes.h"
#include "collectives/transport/request.h"

namespace hvd::collectives {

using Tag = uint64_t;

class Connection {
 public:
  virtual ~Connection() = default;
  virtual int peerRank() const = 0;
  virtual std::string peerAddress() const = 0;
  // `data` must stay valid and unmodified until the request completes.
  virtual Request isend(ConstBytes data, Tag tag) = 0;
  // `data` must stay valid until the request completes; it receives exactly data.size() bytes.
  virtual Request irecv(MutableBytes data, Tag tag) = 0;
  virtual void close() = 0;
};

}  // namespace hvd::collectives
