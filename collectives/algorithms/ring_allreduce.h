// Ring allreduce pipelined across steps: the bandwidth-optimal algorithm for large payloads.
#pragma once

#include <cstddef>

#include "collectives/algorithms/dtype.h"
#include "collectives/algorithms/ring.h"
#include "collectives/transport/comm.h"

namespace hvd::collectives {

// Reduces `input` (left unchanged unless it is `data`) across the ring into `data`. `blocks`
// cuts the buffer into n blocks; messages are segments of at most segmentBytes. The result is
// finished as finishAllreduce does (Average's division, then `postscale`) by the rank that
// completes each segment, before the allgather passes it on: each rank finishes 1/n of the
// buffer instead of all of it, with the same values.
void ringAllreduce(Comm& comm, const std::byte* input, std::byte* data, const Blocks& blocks,
                   DType dtype, ReduceOp op, std::size_t segmentBytes, Tag tag,
                   double postscale = 1.0);

// The segment of a ring allreduce of `bytes` over `ranks`: about four per block keep the
// pipeline full without paying a message per few kilobytes (measured on loopback TCP, 128 KiB
// segments win at 256 KiB-1 MiB and 512 KiB ones from 4 MiB up), at most `limit`. One rule for
// the ring and the cost model that predicts it.
std::size_t ringSegmentBytes(std::size_t bytes, int ranks, std::size_t limit);

}  // namespace hvd::collectives
