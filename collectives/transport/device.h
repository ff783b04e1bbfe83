// A transport's factory for communicators, after Gloo's transport::Device: it publishes this
// rank's address in the rendezvous store and connects to every peer.
#pragma once

#include <chrono>
#include <memory>

#include "collectives/rendezvous/store.h"
#include "collectives/transport/comm.h"
#include "common/error.h"

namespace hvd::collectives {

// This transport cannot link the ranks asked of it (shared memory: no /dev/shm, too little
// space, a peer on another host). A transport that throws it decides collectively, so every
// rank throws it and all of them can try the next transport of the runtime's table together.
class TransportUnavailable : public IoError {
 public:
  using IoError::IoError;
};

class Device {
 public:
  virtual ~Device() = default;
  // Blocks until every peer is connected and authenticated, or throws TimeoutError naming the
  // ranks that did not publish or connect within `connectTimeout`. The Comm's operations use
  // `opTimeout`. `store` should be scoped to this communicator (PrefixStore).
  virtual std::unique_ptr<Comm> connectAll(int rank, int size, rendezvous::Store& store,
                                           std::chrono::milliseconds connectTimeout,
                                           std::chrono::milliseconds opTimeout) = 0;
};

}  // namespace hvd::collectives
