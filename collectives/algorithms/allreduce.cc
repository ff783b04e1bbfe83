// Ring allreduce (bandwidth-optimal), as in Gloo's allreduce_ring and NCCL's ring:
//   The buffer is cut into n chunks. Reduce-scatter: in n-1 steps each rank sends one chunk to
//   its right neighbour and reduces the chunk arriving from its left one into its buffer; after
//   them rank r holds the full reduction of chunk (r+1) mod n. Allgather: in n-1 more steps the
//   reduced chunks travel round the ring, received straight into the output.
//   Rounds: 2(n-1). Bytes sent per rank: 2(n-1)/n * buffer size.
//   Each step is split into segments of at most maxSegmentBytes; the receive of segment k+2 is
//   posted as soon as segment k is reduced (double-buffered scratch), so sends, receives and the
//   reduction overlap.
#include "collectives/algorithms/allreduce.h"

#include <cstring>
#include <vector>

#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/tags.h"

namespace hvd::collectives {
namespace {

struct Span {
  std::size_t offset;  // elements
  std::size_t count;
};

Span chunkOf(std::size_t count, int n, int index) {
  std::size_t base = count / n, extra = count % n;
  std::size_t i = static_cast<std::size_t>(index);
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

std::vector<Span> segmentsOf(Span chunk, std::size_t segmentElems) {
  std::vector<Span> out;
  for (std::size_t done = 0; done < chunk.count; done += segmentElems)
    out.push_back({chunk.offset + done, std::min(segmentElems, chunk.count - done)});
  return out;
}

class Ring {
 public:
  Ring(Comm& comm, std::byte* data, std::size_t count, DType dtype, ReduceOp op,
       const AllreduceOptions& options)
      : comm_(comm),
        data_(data),
        count_(count),
        dtype_(dtype),
        op_(op),
        elem_(dtypeSize(dtype)),
        segmentElems_(std::max<std::size_t>(1, options.maxSegmentBytes / elem_)),
        tag_(makeTag(TagPrefix::Allreduce, comm.nextSequence())),
        next_(comm.peer((comm.rank() + 1) % comm.size())),
        prev_(comm.peer((comm.rank() + comm.size() - 1) % comm.size())) {}

  void run() {
    int n = comm_.size(), r = comm_.rank();
    std::vector<std::byte> scratch(2 * std::min(segmentElems_, count_ / n + 1) * elem_);
    for (int s = 0; s < n - 1; ++s)
      reduceStep(chunkOf(count_, n, (r - s + n) % n), chunkOf(count_, n, (r - s - 1 + 2 * n) % n),
                 scratch);
    for (int s = 0; s < n - 1; ++s)
      copyStep(chunkOf(count_, n, (r - s + 1 + n) % n), chunkOf(count_, n, (r - s + 2 * n) % n));
  }

 private:
  ConstBytes bytesOf(Span s) const { return {data_ + s.offset * elem_, s.count * elem_}; }

  std::vector<Request> sendAll(Span chunk) {
    std::vector<Request> sends;
    for (Span seg : segmentsOf(chunk, segmentElems_)) sends.push_back(next_.isend(bytesOf(seg), tag_));
    return sends;
  }

  void reduceStep(Span sendChunk, Span recvChunk, std::vector<std::byte>& scratch) {
    auto deadline = comm_.deadline();
    auto sends = sendAll(sendChunk);
    auto segs = segmentsOf(recvChunk, segmentElems_);
    std::size_t slotBytes = scratch.size() / 2;
    Request recvs[2];
    auto post = [&](std::size_t k) {
      recvs[k % 2] = prev_.irecv({scratch.data() + (k % 2) * slotBytes, segs[k].count * elem_}, tag_);
    };
    for (std::size_t k = 0; k < std::min<std::size_t>(2, segs.size()); ++k) post(k);
    for (std::size_t k = 0; k < segs.size(); ++k) {
      recvs[k % 2].wait(deadline);
      reduceInto(data_ + segs[k].offset * elem_, scratch.data() + (k % 2) * slotBytes,
                 segs[k].count, dtype_, op_);
      if (k + 2 < segs.size()) post(k + 2);
    }
    for (auto& s : sends) s.wait(deadline);
  }

  void copyStep(Span sendChunk, Span recvChunk) {
    auto deadline = comm_.deadline();
    std::vector<Request> recvs;
    for (Span seg : segmentsOf(recvChunk, segmentElems_))
      recvs.push_back(prev_.irecv({data_ + seg.offset * elem_, seg.count * elem_}, tag_));
    auto sends = sendAll(sendChunk);
    for (auto& r : recvs) r.wait(deadline);
    for (auto& s : sends) s.wait(deadline);
  }

  Comm& comm_;
  std::byte* data_;
  std::size_t count_;
  DType dtype_;
  ReduceOp op_;
  std::size_t elem_;
  std::size_t segmentElems_;
  Tag tag_;
  Connection& next_;
  Connection& prev_;
};

}  // namespace

void allreduce(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
               ReduceOp op, const AllreduceOptions& options) {
  checkReducible(dtype, op);
  if (count == 0) return;
  if (input != output) std::memcpy(output, input, count * dtypeSize(dtype));
  if (comm.size() == 1) return;
  Ring(comm, static_cast<std::byte*>(output), count, dtype, op, options).run();
  if (op == ReduceOp::Average) scale(output, count, dtype, 1.0 / comm.size());
}

}  // namespace hvd::collectives
