// Ring allgather (ring.h): each rank starts with its own block in place; in n-1 steps every
// block travels once round the ring. Rounds: n-1. Bytes sent per rank: total - own block.
#include "collectives/algorithms/allgather.h"

#include <cstring>

#include "collectives/algorithms/ring.h"
#include "collectives/algorithms/tags.h"

namespace hvd::collectives {

void allgatherv(Comm& comm, const void* input, void* output,
                const std::vector<std::size_t>& blockBytes, std::size_t segmentBytes) {
  HVD_ENFORCE_EQ(static_cast<int>(blockBytes.size()), comm.size());
  Tag tag = makeTag(TagPrefix::Allgather, comm.nextSequence());
  Blocks blocks = blocksOf(blockBytes);
  auto* out = static_cast<std::byte*>(output);
  int r = comm.rank();
  std::byte* mine = out + blocks.offsets[r];
  if (blocks.counts[r] > 0 && mine != input) std::memmove(mine, input, blocks.counts[r]);
  ringAllgather(comm, out, blocks, 1, 0, segmentBytes, tag);
}

}  // namespace hvd::collectives
