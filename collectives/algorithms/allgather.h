// Allgather with a different size per rank: rank r contributes blockBytes[r] bytes and every
// rank ends with all blocks concatenated in rank order.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/transport/comm.h"

namespace hvd::collectives {

// `output` holds the sum of blockBytes; `input` may alias this rank's block of `output`.
void allgatherv(Comm& comm, const void* input, void* output,
                const std::vector<std::size_t>& blockBytes, std::size_t segmentBytes = 512 * 1024);

}  // namespace hvd::collectives
