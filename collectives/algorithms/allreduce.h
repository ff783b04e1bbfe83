// Allreduce over a Comm: every rank ends with op(input of rank 0, ..., input of rank n-1),
// bit-identical on every rank.
#pragma once

#include <cstddef>

#include "collectives/algorithms/dtype.h"
#include "collectives/transport/comm.h"

namespace hvd::collectives {

struct AllreduceOptions {
  // Largest message of the ring, which is pipelined in segments (about a quarter of a block,
  // at least 128 KiB, at most this) so that sending, receiving and reducing overlap; 0: the
  // communicator's pipelineSegmentBytes(). Tests set it tiny to reach multi-segment paths.
  std::size_t maxSegmentBytes = 0;
  // Payloads below this use recursive doubling (log2 n rounds, latency-optimal); larger ones
  // use the ring (2(n-1) rounds, bandwidth-optimal).
  std::size_t ringThresholdBytes = 128 * 1024;
  double prescale = 1.0;   // applied to the input before reducing
  double postscale = 1.0;  // applied to the result (Average additionally divides by n)
};

// `input` may equal `output` (in place). Blocks until done; throws IoError/TimeoutError naming
// the peer, InvalidArgument for an op or scale the dtype does not support.
void allreduce(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
               ReduceOp op, const AllreduceOptions& options = {});

}  // namespace hvd::collectives
