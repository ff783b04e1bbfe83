// Allreduce over a Comm: every rank ends with op(input of rank 0, ..., input of rank n-1).
#pragma once

#include <cstddef>

#include "collectives/algorithms/dtype.h"
#include "collectives/transport/comm.h"

namespace hvd::collectives {

struct AllreduceOptions {
  // Largest message of the ring; each ring step is pipelined in segments of this size so that
  // sending, receiving and reducing overlap. Tests set it tiny to reach multi-segment paths.
  std::size_t maxSegmentBytes = 256 * 1024;
};

// `input` may equal `output` (in place). Blocks until done; throws IoError/TimeoutError naming
// the peer, InvalidArgument for an op the dtype does not support. Average divides by the size.
void allreduce(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
               ReduceOp op, const AllreduceOptions& options = {});

}  // namespace hvd::collectives
