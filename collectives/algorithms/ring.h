// The two phases of a ring, shared by allreduce, reducescatter and allgather. Each works in
// place on one buffer cut into n blocks (block i: offsets[i], counts[i], in elements of
// elemBytes), with rank r sending to r+1 and receiving from r-1.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/algorithms/dtype.h"
#include "collectives/transport/comm.h"

namespace hvd::collectives {

struct Blocks {
  std::vector<std::size_t> offsets;  // elements
  std::vector<std::size_t> counts;   // elements
};

// A run of elements [offset, offset + count).
struct Segment {
  std::size_t offset;
  std::size_t count;
};

// [offset, offset + count) cut into consecutive segments of at most perSegment elements; the
// sender and the receiver of a block compute the same cuts, which keeps their messages matched.
std::vector<Segment> segmentsOf(std::size_t offset, std::size_t count, std::size_t perSegment);

// The largest message of a pipelined collective: `chosen` (HVD_SEGMENT_BYTES), or when 0 the
// size the communicator's transport prefers.
inline std::size_t segmentLimit(const Comm& comm, std::size_t chosen) {
  return chosen ? chosen : comm.pipelineSegmentBytes();
}

// a mod n in [0, n), for ring positions that step below zero.
inline int ringIndex(int a, int n) { return ((a % n) + n) % n; }

// `count` elements cut into n blocks as evenly as possible, the first ones one larger.
Blocks evenBlocks(std::size_t count, int n);
// Consecutive blocks of the given sizes.
Blocks blocksOf(const std::vector<std::size_t>& counts);

// Reduce-scatter phase, n-1 steps. In step s rank r sends block (r - s + shift) and writes
// input op (the block (r - s - 1 + shift) arriving from r-1) into `data`; afterwards rank r
// holds the full reduction of block (r + 1 + shift) mod n in `data`. `input` may be `data`;
// when it is not, it is only read, so an out-of-place collective needs no copy. Each step is
// pipelined in segments of segmentBytes with a double-buffered scratch area, so receive,
// reduce and send overlap.
void ringReduceScatter(Comm& comm, const std::byte* input, std::byte* data, const Blocks& blocks,
                       DType dtype, ReduceOp op, int shift, std::size_t segmentBytes, Tag tag);

// Allgather phase, n-1 steps. Rank r starts holding block (r + own) mod n; in step s it sends
// block (r + own - s) and receives block (r + own - s - 1) straight into place.
void ringAllgather(Comm& comm, std::byte* data, const Blocks& blocks, std::size_t elemBytes,
                   int own, std::size_t segmentBytes, Tag tag);

// The same with blocks that may be scattered: blockRanges[i] lists block i's runs of bytes in
// `data`, in the order both ends send and receive them.
using BlockRanges = std::vector<std::vector<Segment>>;
void ringAllgather(Comm& comm, std::byte* data, const BlockRanges& blockRanges, int own,
                   std::size_t segmentBytes, Tag tag);

}  // namespace hvd::collectives
