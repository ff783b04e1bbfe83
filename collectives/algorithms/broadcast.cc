// Broadcast, chosen by size:
// - Binomial tree (small payloads): ranks renumbered relative to the root; in round k every
//   rank that holds the data sends it to the rank 2^k above it. Rounds: ceil(log2 n).
// - Pipelined chain (large payloads, n > 2): root -> root+1 -> ... in segments; each rank
//   forwards a segment as soon as it has it. Time ~ size/bandwidth + (n-2) segment times;
//   bytes sent per rank: size (the last rank sends nothing).
#include "collectives/algorithms/broadcast.h"

#include <vector>

#include "collectives/algorithms/ring.h"
#include "collectives/algorithms/tags.h"

namespace hvd::collectives {
namespace {

void binomialTree(Comm& comm, std::byte* data, std::size_t bytes, int root, Tag tag) {
  int n = comm.size();
  auto deadline = comm.deadline();
  int relative = (comm.rank() - root + n) % n;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (relative & mask) {
      comm.peer((relative - mask + root) % n).irecv({data, bytes}, tag).wait(deadline);
      break;
    }
  }
  std::vector<Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (relative + mask < n)
      sends.push_back(comm.peer((relative + mask + root) % n).isend({data, bytes}, tag));
  for (auto& s : sends) s.wait(deadline);
}

void pipelinedChain(Comm& comm, std::byte* data, std::size_t bytes, int root, Tag tag,
                    std::size_t segmentBytes) {
  int n = comm.size();
  auto deadline = comm.deadline();
  int relative = (comm.rank() - root + n) % n;
  bool hasPrev = relative > 0, hasNext = relative < n - 1;
  std::vector<Request> recvs, sends;
  auto segs = segmentsOf(0, bytes, segmentBytes);
  Connection* prev = hasPrev ? &comm.peer(ringIndex(comm.rank() - 1, n)) : nullptr;
  Connection* next = hasNext ? &comm.peer(ringIndex(comm.rank() + 1, n)) : nullptr;
  if (prev)
    for (auto seg : segs) recvs.push_back(prev->irecv({data + seg.offset, seg.count}, tag));
  for (std::size_t k = 0; k < segs.size(); ++k) {
    if (prev) recvs[k].wait(deadline);
    if (next) sends.push_back(next->isend({data + segs[k].offset, segs[k].count}, tag));
  }
  for (auto& s : sends) s.wait(deadline);
}

}  // namespace

void broadcast(Comm& comm, void* data, std::size_t bytes, int root,
               const BroadcastOptions& options) {
  int n = comm.size();
  if (root < 0 || root >= n)
    throw InvalidArgument(
        detail::concat("broadcast: root rank ", root, " is outside [0, ", n, ")"));
  Tag tag = makeTag(TagPrefix::Broadcast, comm.nextSequence());
  if (n == 1 || bytes == 0) return;
  auto* buf = static_cast<std::byte*>(data);
  if (n > 2 && bytes >= options.pipelineThresholdBytes)
    pipelinedChain(comm, buf, bytes, root, tag, segmentLimit(comm, options.maxSegmentBytes));
  else
    binomialTree(comm, buf, bytes, root, tag);
}

}  // namespace hvd::collectives
