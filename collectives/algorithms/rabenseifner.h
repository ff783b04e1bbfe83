// Rabenseifner's allreduce: reduce-scatter by recursive halving, then allgather by recursive
// doubling. Between recursive doubling (latency-bound payloads) and the ring (bandwidth-bound
// payloads on few ranks): ring-like bytes in logarithmically many rounds.
#pragma once

#include <cstddef>

#include "collectives/algorithms/dtype.h"
#include "collectives/transport/comm.h"

namespace hvd::collectives {

// Reduces `input` (left unchanged unless it is `data`) over every rank of `comm` into `data`,
// for any world size. The result is finished as finishAllreduce does (Average's division, then
// `postscale`) once per element, by the rank that completes its block, before the allgather
// copies it around, so every rank ends bit-identical. Receives into comm.scratch(). All
// messages carry `tag`; the wait for them is bounded by one comm.deadline(). Throws what the
// transport's requests throw (IoError, TimeoutError naming the peer).
void rabenseifnerAllreduce(Comm& comm, const std::byte* input, std::byte* data, std::size_t count,
                           DType dtype, ReduceOp op, Tag tag, double postscale = 1.0);

}  // namespace hvd::collectives
