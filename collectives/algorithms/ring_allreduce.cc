// Ring allreduce, pipelined by segment across all 2(n-1) steps (as NCCL's rings are):
//   Steps 0..n-2 are reduce-scatter (rank r sends block r-s, reduces block r-s-1 arriving from
//   r-1), steps n-1..2n-3 allgather (sends block r+1-t, receives block r-t in place). Every
//   block is cut into the same segments, and segment k moves on to step s+1 as soon as step s
//   has received (and for reduce-scatter, reduced) it, so the next step's traffic flows while
//   this step's later segments are still arriving: both directions of every link stay busy and
//   the phases overlap instead of meeting at a barrier.
//   Rounds: 2(n-1). Bytes sent per rank: 2(n-1)/n * size (optimal).
//   Receives are posted in (step, segment) order, the order the left neighbour sends in, with
//   up to kSlots reduce-scatter receives in flight into scratch; allgather receives land in
//   place. A block's region is only overwritten by data that causally follows this rank's own
//   send of it, so no send is ever overtaken.
#include "collectives/algorithms/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "collectives/algorithms/reduce.h"

namespace hvd::collectives {
namespace {

constexpr std::size_t kSlots = 4;

struct Piece {
  int step;
  std::size_t offset;  // elements
  std::size_t count;
};

class PipelinedRing {
 public:
  PipelinedRing(Comm& comm, const std::byte* input, std::byte* data, const Blocks& blocks,
                DType dtype, ReduceOp op, std::size_t segmentBytes, Tag tag, double postscale)
      : comm_(comm),
        input_(input),
        data_(data),
        blocks_(blocks),
        dtype_(dtype),
        op_(op),
        postscale_(postscale),
        elem_(dtypeSize(dtype)),
        perSegment_(std::max<std::size_t>(1, segmentBytes / elem_)),
        tag_(tag),
        n_(comm.size()),
        r_(comm.rank()),
        next_(comm.peer(ringIndex(r_ + 1, n_))),
        prev_(comm.peer(ringIndex(r_ - 1, n_))) {}

  void run() {
    deadline_ = comm_.deadline();
    scratch_ = comm_.scratch(kSlots * perSegment_ * elem_);
    for (int s = 0; s < steps(); ++s)
      for (auto p : piecesOf(s, recvBlock(s))) recvPieces_.push_back(p);
    for (auto p : piecesOf(0, sendBlock(0))) send(p, input_);
    slotOf_.resize(recvPieces_.size());
    postReceives();
    for (std::size_t i = 0; i < recvPieces_.size(); ++i) {
      pending_.front().wait(deadline_);
      pending_.pop_front();
      const Piece& p = recvPieces_[i];
      std::size_t at = p.offset * elem_;
      if (p.step < n_ - 1) {
        reduce(data_ + at, input_ + at, slot(i), p.count, dtype_, op_);
        ++freeSlots_;
        // The last reduce-scatter step completes this segment: finish it before it travels.
        if (p.step == n_ - 2) finishAllreduce(data_ + at, p.count, dtype_, op_, n_, postscale_);
      }
      if (p.step + 1 < steps()) send({p.step + 1, p.offset, p.count}, data_);
      postReceives();
    }
    for (auto& s : sends_) s.wait(deadline_);
  }

 private:
  int steps() const { return 2 * (n_ - 1); }
  int sendBlock(int s) const {
    return s < n_ - 1 ? ringIndex(r_ - s, n_) : ringIndex(r_ + 1 - (s - n_ + 1), n_);
  }
  int recvBlock(int s) const {
    return s < n_ - 1 ? ringIndex(r_ - s - 1, n_) : ringIndex(r_ - (s - n_ + 1), n_);
  }

  std::vector<Piece> piecesOf(int step, int block) const {
    std::vector<Piece> out;
    for (auto seg : segmentsOf(blocks_.offsets[block], blocks_.counts[block], perSegment_))
      out.push_back({step, seg.offset, seg.count});
    return out;
  }

  std::byte* slot(std::size_t receiveIndex) const {
    return scratch_ + (slotOf_[receiveIndex] * perSegment_ * elem_);
  }

  void send(const Piece& p, const std::byte* from) {
    sends_.push_back(next_.isend({from + p.offset * elem_, p.count * elem_}, tag_));
  }

  // Posts receives in order while reduce-scatter ones have a free scratch slot.
  void postReceives() {
    while (posted_ < recvPieces_.size()) {
      const Piece& p = recvPieces_[posted_];
      std::byte* into;
      if (p.step < n_ - 1) {
        if (freeSlots_ == 0) return;
        --freeSlots_;
        slotOf_[posted_] = nextSlot_;
        nextSlot_ = (nextSlot_ + 1) % kSlots;
        into = slot(posted_);
      } else {
        into = data_ + p.offset * elem_;
      }
      pending_.push_back(prev_.irecv({into, p.count * elem_}, tag_));
      ++posted_;
    }
  }

  Comm& comm_;
  const std::byte* input_;
  std::byte* data_;
  const Blocks& blocks_;
  DType dtype_;
  ReduceOp op_;
  double postscale_;
  std::size_t elem_, perSegment_;
  Tag tag_;
  int n_, r_;
  Connection& next_;
  Connection& prev_;
  Deadline deadline_{};
  std::byte* scratch_ = nullptr;
  std::vector<Piece> recvPieces_;
  std::vector<std::size_t> slotOf_;
  std::deque<Request> pending_;
  std::vector<Request> sends_;
  std::size_t posted_ = 0, freeSlots_ = kSlots, nextSlot_ = 0;
};

}  // namespace

std::size_t ringSegmentBytes(std::size_t bytes, int ranks, std::size_t limit) {
  constexpr std::size_t kMinSegment = 128 * 1024;
  return std::min(limit, std::max(kMinSegment, bytes / ranks / 4));
}

void ringAllreduce(Comm& comm, const std::byte* input, std::byte* data, const Blocks& blocks,
                   DType dtype, ReduceOp op, std::size_t segmentBytes, Tag tag, double postscale) {
  if (comm.size() == 1) {
    std::size_t count = 0;
    for (auto c : blocks.counts) count += c;
    if (input != data) std::memcpy(data, input, count * dtypeSize(dtype));
    return finishAllreduce(data, count, dtype, op, 1, postscale);
  }
  PipelinedRing(comm, input, data, blocks, dtype, op, segmentBytes, tag, postscale).run();
}

}  // namespace hvd::collectives
