// Broadcast over a Comm: every rank ends with root's buffer.
#pragma once

#include <cstddef>

#include "collectives/transport/comm.h"

namespace hvd::collectives {

struct BroadcastOptions {
  std::size_t pipelineThresholdBytes = 256 * 1024;  // from here on, a pipelined chain
  std::size_t maxSegmentBytes = 0;  // the chain's largest message; 0: comm.pipelineSegmentBytes()
};

// Throws InvalidArgument if root is outside [0, size).
void broadcast(Comm& comm, void* data, std::size_t bytes, int root,
               const BroadcastOptions& options = {});

}  // namespace hvd::collectives
