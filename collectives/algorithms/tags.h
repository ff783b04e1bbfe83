// Message tags: a per-collective prefix in the top byte and the operation's sequence number
// (Comm::nextSequence) below it, so messages of different operations can never be confused.
#pragma once

#include <cstdint>

#include "collectives/transport/connection.h"

namespace hvd::collectives {

enum class TagPrefix : uint8_t {
  Allreduce = 1,
  Broadcast = 2,
  Barrier = 3,
  Allgather = 4,
  Alltoall = 5,
  Reducescatter = 6,
};

inline Tag makeTag(TagPrefix prefix, uint64_t sequence) {
  return (static_cast<uint64_t>(prefix) << 56) | (sequence & ((uint64_t{1} << 56) - 1));
}

}  // namespace hvd::collectives
