// Broadcast over a Comm: every rank ends with root's buffer.
#pragma once

#include <cstddef>

#include "collectives/transport/comm.h"

namespace hvd::collectives {

// Throws InvalidArgument if root is outside [0, size).
void broadcast(Comm& comm, void* data, std::size_t bytes, int root);

}  // namespace hvd::collectives
