// Allgather, by communicator:
// - Ring (ring.h): each rank starts with its own block in place; in n-1 steps every block
//   travels once round the ring. Rounds: n-1. Bytes sent per rank: total - own block.
// - Bruck's (Bruck et al., 1997; MPICH's allgather for small messages), without its final
//   rotation: every block is received straight into place. Rank r holds blocks r, r+1, ...
//   (mod n); in the round of distance d it sends the first min(d, n-d) of them to r-d and
//   receives blocks r+d, ... from r+d, so what it holds doubles each round. Rounds:
//   ceil(log2 n). Bytes sent per rank: total - own block, as the ring.
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
#include "collectives/transport/request.h"

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

// The bytes of blocks first, first+1, ... (count of them, mod n): one run, or two where they
// wrap past the last block.
std::vector<Segment> runsOf(const Blocks& blocks, int first, int count) {
  int n = static_cast<int>(blocks.offsets.size()), last = first + count - 1;
  auto end = [&](int b) { return blocks.offsets[b] + blocks.counts[b]; };
  if (last < n) return {{blocks.offsets[first], end(last) - blocks.offsets[first]}};
  return {{blocks.offsets[first], end(n - 1) - blocks.offsets[first]}, {0, end(last - n)}};
}

void bruckAllgather(Comm& comm, std::byte* out, const Blocks& blocks, std::size_t segmentBytes,
                    Tag tag) {
  int n = comm.size(), r = comm.rank();
  std::size_t perSegment = std::max<std::size_t>(1, segmentBytes);
  for (int d = 1; d < n; d *= 2) {
    int count = std::min(d, n - d);
    auto deadline = comm.deadline();
    Connection& to = comm.peer(ringIndex(r - d, n));
    Connection& from = comm.peer(ringIndex(r + d, n));
    std::vector<Request> requests;
    // Disjoint: the blocks received are ones this rank does not hold yet.
    for (const Segment& run : runsOf(blocks, ringIndex(r + d, n), count))
      for (auto seg : segmentsOf(run.offset, run.count, perSegment))
        requests.push_back(from.irecv({out + seg.offset, seg.count}, tag));
    for (const Segment& run : runsOf(blocks, r, count))
      for (auto seg : segmentsOf(run.offset, run.count, perSegment))
        requests.push_back(to.isend({out + seg.offset, seg.count}, tag));
    for (auto& req : requests) req.wait(deadline);
  }
}

}  // namespace

// Bruck's rounds carry the ring's bytes in log2 n latencies instead of n-1, but to partners up
// to n/2 ranks away: where L ranks share a host, most rounds cross hosts for all of them at
// once, and the host's NIC carries about L times the ring's bytes. It saves about n latencies
// (alpha) and costs at most (L-1) * total / (NIC bandwidth): with alpha = 5 us, 100 Gb/s NICs
// and 8 ranks per host, the two meet at blocks of about 8 KiB on average, so up to that Bruck
// is never slower; one rank per host, or shared memory within one, it is never slower at any
// size, so this errs towards the ring. At 3 ranks both take 2 rounds. Over shared memory
// (buffersPerPeer) each of its log2 n peers would take a ring of /dev/shm where the ring takes
// one: 16 ranks' init would hold 67 MiB instead of 20, for steps of a few microseconds.
AllgatherAlgorithm chooseFlatAllgather(int n, std::size_t totalBytes, bool buffersPerPeer) {
  constexpr std::size_t kBruckBlockBytes = 8 * 1024;
  return n > 3 && !buffersPerPeer && totalBytes <= static_cast<std::size_t>(n) * kBruckBlockBytes
             ? AllgatherAlgorithm::Bruck
             : AllgatherAlgorithm::Ring;
}

void allgatherv(Comm& comm, const void* input, void* output,
                const std::vector<std::size_t>& blockBytes, std::size_t segmentBytes,
                AllgatherAlgorithm algorithm) {
  HVD_ENFORCE_EQ(static_cast<int>(blockBytes.size()), comm.size());
  Tag tag = makeTag(TagPrefix::Allgather, comm.nextSequence());
  Blocks blocks = blocksOf(blockBytes);
  auto* out = static_cast<std::byte*>(output);
  int r = comm.rank();
  std::byte* mine = out + blocks.offsets[r];
  if (blocks.counts[r] > 0 && mine != input) std::memmove(mine, input, blocks.counts[r]);
  const Comm::Hierarchy* h = comm.hierarchy();
  if (algorithm == AllgatherAlgorithm::Auto && h && h->allgather)
    return hierarchical(*h, blocks, out, segmentBytes, tag);
  std::size_t total = blocks.offsets.back() + blocks.counts.back();
  if (algorithm == AllgatherAlgorithm::Auto)
    algorithm = chooseFlatAllgather(comm.size(), total, comm.buffersPerPeer());
  if (algorithm == AllgatherAlgorithm::Bruck)
    bruckAllgather(comm, out, blocks, segmentBytes, tag);
  else
    ringAllgather(comm, out, blocks, 1, 0, segmentBytes, tag);
}

}  // namespace hvd::collectives
