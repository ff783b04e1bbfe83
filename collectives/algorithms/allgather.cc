// Allgather, by communicator:
// - Ring (ring.h): each rank starts with its own block in place; in n-1 steps every block
//   travels once round the ring. Rounds: n-1. Bytes sent per rank: total - own block.
// - Hierarchical (a communicator whose Comm::Hierarchy has allgather on: H hosts of L ranks):
//   the ranks of local index i on every host first gather their own blocks across hosts (a
//   ring of H), then each host's ranks gather those columns among themselves (a ring of L, over
//   shared memory where the runtime could link them so). The network carries the same bytes
//   as the flat ring, in H-1 rounds instead of HL-1, over the L ranks' links at once. Every
//   rank then holds all blocks ordered by local index, then by rank within the column; one
//   local copy puts them in rank order, unless that is already the order (one rank per host,
//   or ranks dealt round-robin over the hosts), when the columns are gathered into place.
#include "collectives/algorithms/allgather.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "collectives/algorithms/ring.h"
#include "collectives/algorithms/tags.h"

namespace hvd::collectives {
namespace {

void hierarchical(Comm& world, const Comm::Hierarchy& h, const void* input, std::byte* out,
                  const std::vector<std::size_t>& blockBytes, const Blocks& placed,
                  std::size_t segmentBytes) {
  int perHost = h.local->size();
  // order[k]: the rank whose block is k-th in the gathered layout; column i holds the blocks of
  // local index i's cross communicator, in its rank order (ascending ranks).
  std::vector<int> order;
  std::vector<std::size_t> columnBytes(perHost, 0);
  std::vector<std::size_t> myColumn;  // block sizes in this rank's cross communicator
  for (int i = 0; i < perHost; ++i) {
    std::vector<int> column;
    for (const auto& host : h.hosts) column.push_back(host[i]);
    std::sort(column.begin(), column.end());
    for (int r : column) {
      order.push_back(r);
      columnBytes[i] += blockBytes[r];
      if (i == h.local->rank()) myColumn.push_back(blockBytes[r]);
    }
  }
  bool inRankOrder = true;
  for (std::size_t k = 0; k < order.size(); ++k) inRankOrder &= order[k] == static_cast<int>(k);
  std::size_t total = std::accumulate(blockBytes.begin(), blockBytes.end(), std::size_t{0});
  // The staging area is the communicator's scratch, which the stages (on their own
  // communicators) do not touch.
  std::byte* gathered = inRankOrder ? out : world.scratch(total);
  std::size_t columnOffset =
      std::accumulate(columnBytes.begin(), columnBytes.begin() + h.local->rank(), std::size_t{0});
  allgatherv(*h.cross, input, gathered + columnOffset, myColumn, segmentBytes);
  allgatherv(*h.local, gathered + columnOffset, gathered, columnBytes, segmentBytes);
  if (inRankOrder) return;
  std::size_t at = 0;
  for (int r : order) {
    std::memcpy(out + placed.offsets[r], gathered + at, blockBytes[r]);
    at += blockBytes[r];
  }
}

}  // namespace

void allgatherv(Comm& comm, const void* input, void* output,
                const std::vector<std::size_t>& blockBytes, std::size_t segmentBytes) {
  HVD_ENFORCE_EQ(static_cast<int>(blockBytes.size()), comm.size());
  Tag tag = makeTag(TagPrefix::Allgather, comm.nextSequence());
  Blocks blocks = blocksOf(blockBytes);
  auto* out = static_cast<std::byte*>(output);
  if (const Comm::Hierarchy* h = comm.hierarchy(); h && h->allgather) {
    hierarchical(comm, *h, input, out, blockBytes, blocks, segmentBytes);
    return;
  }
  int r = comm.rank();
  std::byte* mine = out + blocks.offsets[r];
  if (blocks.counts[r] > 0 && mine != input) std::memmove(mine, input, blocks.counts[r]);
  ringAllgather(comm, out, blocks, 1, 0, segmentBytes, tag);
}

}  // namespace hvd::collectives
