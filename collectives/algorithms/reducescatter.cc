// Ring reduce-scatter (ring.h) shifted by one block so that rank r finishes holding block r.
// Rounds: n-1. Bytes sent per rank: (n-1)/n * size. Works on a copy so the input stays intact.
#include "collectives/algorithms/reducescatter.h"

#include <cstring>

#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/tags.h"

namespace hvd::collectives {

void reducescatter(Comm& comm, const void* input, void* output, const Blocks& blocks, DType dtype,
                   ReduceOp op, std::size_t segmentBytes) {
  if (op != ReduceOp::Sum && op != ReduceOp::Average)
    throw InvalidArgument(std::string("reducescatter: reduce op ") + reduceOpName(op) +
                          " is not supported (use sum or average)");
  checkReducible(dtype, op);
  Tag tag = makeTag(TagPrefix::Reducescatter, comm.nextSequence());
  HVD_ENFORCE_EQ(static_cast<int>(blocks.counts.size()), comm.size());
  std::size_t elem = dtypeSize(dtype), total = blocks.offsets.back() + blocks.counts.back();
  if (total == 0) return;
  const auto* in = static_cast<const std::byte*>(input);
  if (comm.size() == 1) {
    std::memmove(output, in, total * elem);  // the whole input is rank 0's block
    return;
  }
  // Left over from an earlier call, `work` needs no clearing: the ring writes every block of
  // it before reading that block.
  std::byte* work = comm.workspace(total * elem);
  ringReduceScatter(comm, in, work, blocks, dtype, op, -1, segmentBytes, tag);
  int r = comm.rank();
  std::memcpy(output, work + blocks.offsets[r] * elem, blocks.counts[r] * elem);
  if (op == ReduceOp::Average) divide(output, blocks.counts[r], dtype, comm.size());
}

}  // namespace hvd::collectives
