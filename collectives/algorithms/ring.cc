// Ring phases (Gloo's allreduce_ring, NCCL's ring). Per rank and phase: n-1 rounds, sending
// (n-1)/n of the buffer. Messages are segments of at most segmentBytes; a receive of segment
// k+2 is posted as soon as segment k has been reduced, and all sends of a step are queued at
// once, so the link stays busy in both directions while the CPU reduces.
#include "collectives/algorithms/ring.h"

#include <algorithm>

#include "collectives/algorithms/reduce.h"

namespace hvd::collectives {
std::vector<Segment> segmentsOf(std::size_t offset, std::size_t count, std::size_t perSegment) {
  std::vector<Segment> out;
  for (std::size_t done = 0; done < count; done += perSegment)
    out.push_back({offset + done, std::min(perSegment, count - done)});
  return out;
}

Blocks evenBlocks(std::size_t count, int n) {
  Blocks b;
  std::size_t base = count / n, extra = count % n, offset = 0;
  for (int i = 0; i < n; ++i) {
    std::size_t c = base + (static_cast<std::size_t>(i) < extra ? 1 : 0);
    b.offsets.push_back(offset);
    b.counts.push_back(c);
    offset += c;
  }
  return b;
}

Blocks blocksOf(const std::vector<std::size_t>& counts) {
  Blocks b;
  std::size_t offset = 0;
  for (std::size_t c : counts) {
    b.offsets.push_back(offset);
    b.counts.push_back(c);
    offset += c;
  }
  return b;
}

void ringReduceScatter(Comm& comm, const std::byte* input, std::byte* data, const Blocks& blocks,
                       DType dtype, ReduceOp op, int shift, std::size_t segmentBytes, Tag tag) {
  int n = comm.size(), r = comm.rank();
  if (n == 1) return;
  std::size_t elem = dtypeSize(dtype);
  std::size_t perSegment = std::max<std::size_t>(1, segmentBytes / elem);
  std::size_t largest = *std::max_element(blocks.counts.begin(), blocks.counts.end());
  std::size_t slotElems = std::min(perSegment, largest);
  std::byte* scratch = comm.scratch(2 * slotElems * elem);
  Connection& next = comm.peer(ringIndex(r + 1, n));
  Connection& prev = comm.peer(ringIndex(r - 1, n));
  for (int s = 0; s < n - 1; ++s) {
    auto deadline = comm.deadline();
    int sendBlock = ringIndex(r - s + shift, n), recvBlock = ringIndex(r - s - 1 + shift, n);
    // Step 0 sends a block nobody has reduced yet, straight from the input.
    const std::byte* sendFrom = s == 0 ? input : data;
    std::vector<Request> sends;
    for (auto seg : segmentsOf(blocks.offsets[sendBlock], blocks.counts[sendBlock], perSegment))
      sends.push_back(next.isend({sendFrom + seg.offset * elem, seg.count * elem}, tag));
    auto segs = segmentsOf(blocks.offsets[recvBlock], blocks.counts[recvBlock], perSegment);
    Request recvs[2];
    auto post = [&](std::size_t k) {
      recvs[k % 2] = prev.irecv({scratch + (k % 2) * slotElems * elem, segs[k].count * elem}, tag);
    };
    for (std::size_t k = 0; k < std::min<std::size_t>(2, segs.size()); ++k) post(k);
    for (std::size_t k = 0; k < segs.size(); ++k) {
      recvs[k % 2].wait(deadline);
      std::size_t at = segs[k].offset * elem;
      reduce(data + at, input + at, scratch + (k % 2) * slotElems * elem, segs[k].count, dtype, op);
      if (k + 2 < segs.size()) post(k + 2);
    }
    for (auto& req : sends) req.wait(deadline);
  }
}

void ringAllgather(Comm& comm, std::byte* data, const Blocks& blocks, std::size_t elemBytes,
                   int own, std::size_t segmentBytes, Tag tag) {
  BlockRanges ranges;
  for (std::size_t i = 0; i < blocks.offsets.size(); ++i)
    ranges.push_back({{blocks.offsets[i] * elemBytes, blocks.counts[i] * elemBytes}});
  ringAllgather(comm, data, ranges, own, segmentBytes, tag);
}

void ringAllgather(Comm& comm, std::byte* data, const BlockRanges& blockRanges, int own,
                   std::size_t segmentBytes, Tag tag) {
  int n = comm.size(), r = comm.rank();
  if (n == 1) return;
  std::size_t perSegment = std::max<std::size_t>(1, segmentBytes);
  Connection& next = comm.peer(ringIndex(r + 1, n));
  Connection& prev = comm.peer(ringIndex(r - 1, n));
  for (int s = 0; s < n - 1; ++s) {
    auto deadline = comm.deadline();
    int sendBlock = ringIndex(r + own - s, n), recvBlock = ringIndex(r + own - s - 1, n);
    std::vector<Request> requests;
    for (const Segment& range : blockRanges[recvBlock])
      for (auto seg : segmentsOf(range.offset, range.count, perSegment))
        requests.push_back(prev.irecv({data + seg.offset, seg.count}, tag));
    for (const Segment& range : blockRanges[sendBlock])
      for (auto seg : segmentsOf(range.offset, range.count, perSegment))
        requests.push_back(next.isend({data + seg.offset, seg.count}, tag));
    for (auto& req : requests) req.wait(deadline);
  }
}

}  // namespace hvd::collectives
