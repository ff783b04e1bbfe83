// All-to-all with per-peer sizes: rank r sends sendBytes[j] bytes (consecutive in `input`, in
// peer order) to each rank j and receives recvBytes[j] bytes from each rank j into `output`.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/transport/comm.h"

namespace hvd::collectives {

void alltoallv(Comm& comm, const void* input, const std::vector<std::size_t>& sendBytes,
               void* output, const std::vector<std::size_t>& recvBytes);

}  // namespace hvd::collectives
