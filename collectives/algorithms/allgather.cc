// Allgather, by communicator:
// - Ring (ring.h): each rank starts with its own block in place; in n-1 steps every block
//   travels once round the ring. Rounds: n-1. Bytes sent per rank: total - own block.
// - Hierarchical (a communicator whose Comm::Hierarchy has allgather on: H hosts of L ranks):
//   the ranks of local index i on every host first gather their own blocks across hosts (a
//   ring of H), then each host's ranks gather those columns among themselves (a ring of L, over
//   shared memory where the runtime could link them so), each column being H blocks scattered
//   over the output. Every block lands in place; nothing is staged. The network carries the
//   same bytes as the flat ring, in H-1 rounds instead of HL-1, over L links at once.
#include "collectives/algorithms/allgather.h"

#include <algorithm>
#include <cstring>

#include "collectives/algorithms/ring.h"
#include "collectives/algorithms/tags.h"

namespace hvd::collectives {
namespace {

void hierarchical(const Comm::Hierarchy& h, const Blocks& placed, std::byte* out,
                  std::size_t segmentBytes, Tag tag) {
  auto rangeOf = [&](int rank) { return Segment{placed.offsets[rank], placed.counts[rank]}; };
  // Column i: the blocks of local index i's cross communicator, whose ranks ascend.
  BlockRanges columns(h.local->size());
  BlockRanges mine;  // this rank's column, a block per cross rank
  for (int i = 0; i < h.local->size(); ++i) {
    std::vector<int> column;
    for (const auto& host : h.hosts) column.push_back(host[i]);
    std::sort(column.begin(), column.end());
    for (int r : column) {
      columns[i].push_back(rangeOf(r));
      if (i == h.local->rank()) mine.push_back({rangeOf(r)});
    }
  }
  ringAllgather(*h.cross, out, mine, 0, segmentBytes, tag);
  ringAllgather(*h.local, out, columns, 0, segmentBytes, tag);
}

}  // namespace

void allgatherv(Comm& comm, const void* input, void* output,
                const std::vector<std::size_t>& blockBytes, std::size_t segmentBytes) {
  HVD_ENFORCE_EQ(static_cast<int>(blockBytes.size()), comm.size());
  Tag tag = makeTag(TagPrefix::Allgather, comm.nextSequence());
  Blocks blocks = blocksOf(blockBytes);
  auto* out = static_cast<std::byte*>(output);
  int r = comm.rank();
  std::byte* mine = out + blocks.offsets[r];
  if (blocks.counts[r] > 0 && mine != input) std::memmove(mine, input, blocks.counts[r]);
  if (const Comm::Hierarchy* h = comm.hierarchy(); h && h->allgather)
    hierarchical(*h, blocks, out, segmentBytes, tag);
  else
    ringAllgather(comm, out, blocks, 1, 0, segmentBytes, tag);
}

}  // namespace hvd::collectives
