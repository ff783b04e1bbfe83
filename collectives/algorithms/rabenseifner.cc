// Rabenseifner's allreduce, for any world size n:
// - Fold: with p the largest power of two <= n, the first 2(n-p) ranks pair up, each even rank
//   r with r+1 (neighbours, which launchers usually place on one host, so the fold's extra
//   traffic tends to stay on shared memory). The even rank sends its whole input to the odd
//   one, which reduces it and stands for both; p ranks remain, numbered v = 0..p-1.
// - Reduce-scatter by recursive halving, log2 p rounds: the buffer is cut into p blocks. With
//   distance d = 1, 2, ..., p/2, rank v and v xor d split the blocks they are still reducing:
//   v keeps the lower half when bit d of v is clear, else the upper, sends the other half and
//   reduces what arrives into the kept half. Afterwards v holds the complete reduction of one
//   block (the bit-reversal of v), and finishes it (Average's division, the postscale).
//   Nearest partners first: the large early halves travel between neighbours, which launchers
//   place on one host, and only the small late ones cross between hosts. On hosts of L ranks a
//   host's NIC then carries about the payload each way, as the hierarchical form's does, not L
//   times half of it (cost_model.cc; hvd-bench simulate shows the difference).
// - Allgather by recursive doubling, log2 p rounds, the halving's rounds in reverse: with
//   d = p/2, ..., 1, rank v sends the finished blocks it holds to v xor d and receives that
//   rank's (the half it gave away at distance d) in place.
// - Unfold: each odd rank of a pair sends the whole result to its even partner.
// Rounds: 2 log2 p, +2 when n is not a power of two. Bytes sent per remaining rank:
// 2 (p-1)/p * size, as the ring (plus size for the odd rank of a pair, and size in all for the
// even one). Against the ring: the same bytes in 2 log2 p rounds instead of 2(n-1); against
// recursive doubling: the same number of rounds, moving 2 (p-1)/p * size instead of log2 p * size.
// Each block is reduced on one rank and only copied after, so every rank ends bit-identical.
// When count < p some blocks are empty; an exchange whose range is empty sends no message, and
// both ends compute the same range, so they skip it together.
// Messages all carry the operation's tag: two ranks exchange at most once per phase (at one
// distance), and a connection matches messages in order, so they cannot be confused.
#include "collectives/algorithms/rabenseifner.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/ring.h"

namespace hvd::collectives {
namespace {

// Which ranks remain after the fold, and their numbers among the remaining.
struct Fold {
  explicit Fold(int n) : p(1) {
    while (p * 2 <= n) p *= 2;
    paired = 2 * (n - p);
  }
  bool leaves(int r) const { return r < paired && r % 2 == 0; }
  bool absorbs(int r) const { return r < paired && r % 2 == 1; }
  int remainingRank(int r) const { return r < paired ? r / 2 : r - paired / 2; }
  int realRank(int v) const { return v < paired / 2 ? 2 * v + 1 : v + paired / 2; }

  int p;       // ranks that remain
  int paired;  // ranks 0..paired-1 fold in pairs
};

class Rabenseifner {
 public:
  Rabenseifner(Comm& comm, const std::byte* input, std::byte* data, std::size_t count, DType dtype,
               ReduceOp op, Tag tag, double postscale)
      : comm_(comm),
        input_(input),
        data_(data),
        count_(count),
        dtype_(dtype),
        op_(op),
        tag_(tag),
        postscale_(postscale),
        elem_(dtypeSize(dtype)),
        fold_(comm.size()),
        blocks_(evenBlocks(count, fold_.p)),
        deadline_(comm.deadline()) {}

  void run() {
    int r = comm_.rank();
    if (fold_.leaves(r)) return handOver(comm_.peer(r + 1));
    scratch_ = comm_.scratch(largestReceive(r));
    if (fold_.absorbs(r)) foldIn(comm_.peer(r - 1));
    int v = fold_.remainingRank(r);
    reduceScatter(v);
    Segment mine = halves_.empty() ? range(0, fold_.p) : halves_.back().keep;
    finishAllreduce(data_ + mine.offset * elem_, mine.count, dtype_, op_, comm_.size(), postscale_);
    allgather(v);
    if (fold_.absorbs(r)) exchange(comm_.peer(r - 1), data_, {0, count_}, nullptr, {0, 0});
  }

 private:
  // Elements of blocks [first, last).
  Segment range(int first, int last) const {
    std::size_t begin = blocks_.offsets[first];
    std::size_t end = last < fold_.p ? blocks_.offsets[last] : count_;
    return {begin, end - begin};
  }

  // The scratch a remaining rank needs: the whole buffer for the fold, else the first half it
  // keeps (later halves are smaller).
  std::size_t largestReceive(int r) const {
    if (fold_.absorbs(r)) return count_ * elem_;
    int mid = fold_.p / 2;
    return std::max(range(0, mid).count, range(mid, fold_.p).count) * elem_;
  }

  // Sends `give` of `from` to `peer` while receiving `take.count` elements into `into`.
  void exchange(Connection& peer, const std::byte* from, Segment give, std::byte* into,
                Segment take) {
    Request in = take.count ? peer.irecv({into, take.count * elem_}, tag_) : Request();
    Request out =
        give.count ? peer.isend({from + give.offset * elem_, give.count * elem_}, tag_) : Request();
    in.wait(deadline_);
    out.wait(deadline_);
  }

  // data[range] = current[range] op received (which holds the range from its start); from
  // then on this rank's partial results are in data.
  void reduceRange(const std::byte* received, Segment range) {
    std::size_t at = range.offset * elem_;
    reduce(data_ + at, current_ + at, received, range.count, dtype_, op_);
    current_ = data_;
  }

  // The odd rank of a pair: its partner's whole input arrives, and the reduction of the two
  // is this rank's from now on.
  void foldIn(Connection& partner) {
    Segment all{0, count_};
    exchange(partner, nullptr, {0, 0}, scratch_, all);
    reduceRange(scratch_, all);
  }

  // Recursive halving among the remaining ranks, nearest partner first; leaves one block
  // reduced over every rank, and in halves_ what each round kept and gave away.
  void reduceScatter(int v) {
    int first = 0, last = fold_.p;  // the blocks this rank still reduces
    for (int d = 1; d < fold_.p; d *= 2) {
      int mid = first + (last - first) / 2;
      bool lower = (v & d) == 0;
      Half half{d, lower ? range(first, mid) : range(mid, last),
                lower ? range(mid, last) : range(first, mid)};
      exchange(comm_.peer(fold_.realRank(v ^ d)), current_, half.give, scratch_, half.keep);
      reduceRange(scratch_, half.keep);
      halves_.push_back(half);
      if (lower)
        last = mid;
      else
        first = mid;
    }
  }

  // Recursive doubling, the halving's rounds in reverse: the partner finished what this rank
  // gave it at that distance, and gets back what this rank kept (finished by now).
  void allgather(int v) {
    for (auto it = halves_.rbegin(); it != halves_.rend(); ++it)
      exchange(comm_.peer(fold_.realRank(v ^ it->distance)), data_, it->keep,
               data_ + it->give.offset * elem_, it->give);
  }

  // An even rank of a pair: its input goes to the odd rank, the finished result comes back. In
  // place, the result cannot overwrite the input early: the partner sends it only after it has
  // received all of the input.
  void handOver(Connection& partner) {
    Request out = partner.isend({input_, count_ * elem_}, tag_);
    Request in = partner.irecv({data_, count_ * elem_}, tag_);
    out.wait(deadline_);
    in.wait(deadline_);
  }

  Comm& comm_;
  const std::byte* input_;
  std::byte* data_;
  std::size_t count_;
  DType dtype_;
  ReduceOp op_;
  Tag tag_;
  double postscale_;
  std::size_t elem_;
  Fold fold_;
  Blocks blocks_;
  Deadline deadline_;
  std::byte* scratch_ = nullptr;
  // One round of the halving: the partner's distance, the elements kept and those given away.
  struct Half {
    int distance;
    Segment keep;
    Segment give;
  };
  std::vector<Half> halves_;
  // This rank's partial results: the input until the first reduction, then data.
  const std::byte* current_ = input_;
};

}  // namespace

void rabenseifnerAllreduce(Comm& comm, const std::byte* input, std::byte* data, std::size_t count,
                           DType dtype, ReduceOp op, Tag tag, double postscale) {
  if (comm.size() == 1 || count == 0) {
    if (input != data) std::memcpy(data, input, count * dtypeSize(dtype));
    return finishAllreduce(data, count, dtype, op, comm.size(), postscale);
  }
  Rabenseifner(comm, input, data, count, dtype, op, tag, postscale).run();
}

}  // namespace hvd::collectives
