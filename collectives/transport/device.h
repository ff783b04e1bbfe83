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

// Which pairs of ranks a communicator links. A star suits the engine's control channel, whose
// messages only ever go between rank 0 and each other rank: over TCP it opens N-1 links where
// all pairs open N(N-1)/2 (2,016 connections at 64 ranks, which a launch waits for). A transport
// may link more pairs than asked (shared memory maps every peer's segment anyway).
enum class LinkShape { AllPairs, StarAroundRankZero };

class Device {
 public:
  virtual ~Device() = default;
  // Blocks until every peer `shape` asks for is connected and authenticated, or throws
  // TimeoutError naming the ranks that did not publish or connect within `connectTimeout`. The
  // Comm's operations use `opTimeout`; Comm::peer throws for a pair the shape leaves unlinked.
  // `store` should be scoped to this communicator (PrefixStore).
  virtual std::unique_ptr<Comm> connectAll(int rank, int size, rendezvous::Store& store,
                                           std::chrono::milliseconds connectTimeout,
                                           std::chrono::milliseconds opTimeout,
                                           LinkShape shape = LinkShape::AllPairs) = 0;
};

}  // namespace hvd::collectives
