// Reduce-scatter over a Comm: the element-wise reduction of every rank's input, cut into n
// blocks (evenBlocks: the first count % n blocks one element larger); rank r gets block r.
#pragma once

#include <cstddef>

#include "collectives/algorithms/dtype.h"
#include "collectives/algorithms/ring.h"
#include "collectives/transport/comm.h"

namespace hvd::collectives {

// `blocks` says how the `input` is cut (in elements); `output` receives blocks.counts[rank]
// elements. `input` is left unchanged. Only Sum and Average.
void reducescatter(Comm& comm, const void* input, void* output, const Blocks& blocks, DType dtype,
                   ReduceOp op, std::size_t segmentBytes = 512 * 1024);

}  // namespace hvd::collectives
