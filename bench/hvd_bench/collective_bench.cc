#include "bench/hvd_bench/collective_bench.h"

#include <chrono>
#include <functional>

#include "common/error.h"
#include "test/support/elements.h"

namespace hvd::bench {

using namespace hvd::collectives;
using namespace hvd::test;  // elements.h
using Clock = std::chrono::steady_clock;

namespace {

constexpr Collective kAll[] = {Collective::Allreduce,     Collective::Allgather,
                               Collective::Broadcast,     Collective::Alltoall,
                               Collective::Reducescatter, Collective::Barrier};

// One benchmarked call on prepared buffers, and how to fill and check them.
struct Case {
  std::function<void()> run;
  std::function<void()> fill;
  std::function<long()> countWrong;
};

std::size_t elementsIn(std::size_t bytes, DType t) { return bytes / dtypeSize(t); }

long checkAgainst(const std::vector<std::byte>& buf, DType t, std::size_t begin, std::size_t count,
                  const std::function<double(std::size_t)>& want) {
  long wrong = 0;
  for (std::size_t i = 0; i < count; ++i)
    if (!close(getElement(buf.data(), t, begin + i), want(i), t)) ++wrong;
  return wrong;
}

class Sweep {
 public:
  Sweep(runtime::BlockingCollectives& rt, const BenchOptions& o)
      : rt_(rt), o_(o), n_(rt.topology().size), r_(rt.topology().rank) {}

  Row measure(std::size_t bytes) {
    Row row;
    row.bytes = bytes;
    row.count = countFor(bytes);
    for (bool inPlace : {false, true}) {
      Timing& timing = inPlace ? row.inPlace : row.outOfPlace;
      if (!applicable(inPlace)) continue;
      Case c = makeCase(row.count, inPlace);
      timing.measured = true;
      timing.timeUs = timeIt(c);
      double seconds = timing.timeUs * 1e-6;
      timing.algBw = seconds > 0 ? bytes / seconds / 1e9 : 0;
      timing.busBw = timing.algBw * busBandwidthFactor(o_.op, n_);
      if (o_.check) timing.wrong = checkIt(c);
    }
    return row;
  }

 private:
  std::size_t countFor(std::size_t bytes) const {
    std::size_t total = elementsIn(bytes, o_.dtype);
    switch (o_.op) {
      case Collective::Allgather:
      case Collective::Reducescatter:
        return total / n_ * n_;
      case Collective::Alltoall:
        return total / n_ * n_;
      case Collective::Barrier:
        return 0;
      default:
        return total;
    }
  }

  bool applicable(bool inPlace) const {
    if (o_.placement == (inPlace ? Placement::OutOfPlace : Placement::InPlace)) return false;
    switch (o_.op) {
      case Collective::Broadcast:
        return inPlace;  // hvd's broadcast is in place by nature
      case Collective::Alltoall:
      case Collective::Reducescatter:
        return !inPlace;
      case Collective::Barrier:
        return !inPlace;
      default:
        return true;
    }
  }

  double timeIt(Case& c) {
    c.fill();
    for (int i = 0; i < o_.warmup; ++i) c.run();
    rt_.barrier();
    auto start = Clock::now();
    for (int i = 0; i < o_.iterations; ++i) c.run();
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
                std::max(1, o_.iterations);
    Tensor t{&us, DType::Float64, {1}};
    rt_.allreduce(t, t, ReduceOp::Average);
    return us;
  }

  long checkIt(Case& c) {
    c.fill();
    c.run();
    int64_t wrong = c.countWrong();
    Tensor t{&wrong, DType::Int64, {1}};
    rt_.allreduce(t, t, ReduceOp::Sum);
    return static_cast<long>(wrong);
  }

  Case makeCase(std::size_t count, bool inPlace);

  runtime::BlockingCollectives& rt_;
  const BenchOptions& o_;
  int n_, r_;
  std::vector<std::byte> in_, out_;
};

Case Sweep::makeCase(std::size_t count, bool inPlace) {
  DType t = o_.dtype;
  std::size_t elem = dtypeSize(t);
  int64_t chunk = static_cast<int64_t>(count / std::max(1, n_));
  in_.assign(count * elem + 1, std::byte{0});
  out_.assign(count * elem + 1, std::byte{0});
  auto fillRange = [this, t](std::vector<std::byte>& buf, std::size_t begin, std::size_t k,
                             ReduceOp op) {
    for (std::size_t i = 0; i < k; ++i)
      setElement(buf.data(), t, begin + i, fillValue(t, op, r_, i));
  };
  Case c;
  switch (o_.op) {
    case Collective::Allreduce: {
      std::vector<std::byte>& dst = inPlace ? in_ : out_;
      Tensor in{in_.data(), t, {static_cast<int64_t>(count)}}, out{dst.data(), t, in.shape};
      c.run = [this, in, out] { rt_.allreduce(in, out, o_.redop); };
      c.fill = [=, this] { fillRange(in_, 0, count, o_.redop); };
      c.countWrong = [=, this, &dst] {
        return checkAgainst(dst, t, 0, count,
                            [&](std::size_t i) { return expectedValue(t, o_.redop, n_, i); });
      };
      break;
    }
    case Collective::Allgather: {
      std::byte* src = inPlace ? out_.data() + r_ * chunk * elem : in_.data();
      Tensor in{src, t, {chunk}};
      c.run = [this, in] { rt_.allgather(in, [this](auto&) { return out_.data(); }); };
      c.fill = [=, this] {
        fillRange(inPlace ? out_ : in_, inPlace ? r_ * chunk : 0, chunk, ReduceOp::Sum);
      };
      c.countWrong = [=, this] {
        long wrong = 0;
        for (int q = 0; q < n_; ++q)
          wrong += checkAgainst(out_, t, q * chunk, chunk,
                                [&](std::size_t i) { return fillValue(t, ReduceOp::Sum, q, i); });
        return wrong;
      };
      break;
    }
    case Collective::Broadcast: {
      Tensor tensor{in_.data(), t, {static_cast<int64_t>(count)}};
      int root = o_.root;
      c.run = [this, tensor, root] { rt_.broadcast(tensor, root); };
      c.fill = [=, this] { fillRange(in_, 0, r_ == root ? count : 0, ReduceOp::Sum); };
      c.countWrong = [=, this] {
        return checkAgainst(in_, t, 0, count,
                            [&](std::size_t i) { return fillValue(t, ReduceOp::Sum, root, i); });
      };
      break;
    }
    case Collective::Alltoall: {
      Tensor in{in_.data(), t, {static_cast<int64_t>(count)}};
      c.run = [this, in] { rt_.alltoall(in, {}, [this](auto&) { return out_.data(); }); };
      // Rank r sends block j, filled with values of "rank" r * n + j, to rank j.
      c.fill = [=, this] {
        for (int j = 0; j < n_; ++j)
          for (int64_t i = 0; i < chunk; ++i)
            setElement(in_.data(), t, j * chunk + i, fillValue(t, ReduceOp::Sum, r_ * n_ + j, i));
      };
      c.countWrong = [=, this] {
        long wrong = 0;
        for (int q = 0; q < n_; ++q)
          wrong += checkAgainst(out_, t, q * chunk, chunk, [&](std::size_t i) {
            return fillValue(t, ReduceOp::Sum, q * n_ + r_, i);
          });
        return wrong;
      };
      break;
    }
    case Collective::Reducescatter: {
      Tensor in{in_.data(), t, {static_cast<int64_t>(count)}};
      c.run = [this, in] {
        rt_.reducescatter(in, o_.redop, [this](auto&) { return out_.data(); });
      };
      c.fill = [=, this] { fillRange(in_, 0, count, o_.redop); };
      c.countWrong = [=, this] {
        return checkAgainst(out_, t, 0, chunk, [&](std::size_t i) {
          return expectedValue(t, o_.redop, n_, r_ * chunk + i);
        });
      };
      break;
    }
    case Collective::Barrier:
      c.run = [this] { rt_.barrier(); };
      c.fill = [] {};
      c.countWrong = [] { return 0L; };
      break;
  }
  return c;
}

}  // namespace

Collective parseCollective(const std::string& name) {
  for (Collective c : kAll)
    if (name == collectiveName(c)) return c;
  throw InvalidArgument("-o '" + name +
                        "': unknown collective (use allreduce, allgather, broadcast, alltoall, "
                        "reducescatter or barrier)");
}

Placement parsePlacement(const std::string& name) {
  if (name == "both") return Placement::Both;
  if (name == "out") return Placement::OutOfPlace;
  if (name == "in") return Placement::InPlace;
  throw InvalidArgument("--placement '" + name +
                        "': use both, out (out of place) or in (in place)");
}

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::Allreduce:
      return "allreduce";
    case Collective::Allgather:
      return "allgather";
    case Collective::Broadcast:
      return "broadcast";
    case Collective::Alltoall:
      return "alltoall";
    case Collective::Reducescatter:
      return "reducescatter";
    case Collective::Barrier:
      return "barrier";
  }
  return "?";
}

double busBandwidthFactor(Collective c, int n) {
  switch (c) {
    case Collective::Allreduce:
      return 2.0 * (n - 1) / n;
    case Collective::Allgather:
    case Collective::Reducescatter:
    case Collective::Alltoall:
      return static_cast<double>(n - 1) / n;
    case Collective::Broadcast:
      return 1;
    case Collective::Barrier:
      return 0;
  }
  return 0;
}

std::vector<Row> runSweep(runtime::BlockingCollectives& rt, const BenchOptions& o) {
  if (o.minBytes > o.maxBytes)
    throw InvalidArgument(detail::concat("-b ", o.minBytes, " is above -e ", o.maxBytes));
  if (o.stepFactor <= 1 && o.stepBytes == 0)
    throw InvalidArgument("give -f above 1 or -i above 0 so the sweep advances");
  if (o.root < 0 || o.root >= rt.topology().size)
    throw InvalidArgument(
        detail::concat("-r ", o.root, ": root outside [0, ", rt.topology().size, ")"));
  Sweep sweep(rt, o);
  std::vector<Row> rows;
  if (o.op == Collective::Barrier) return {sweep.measure(0)};
  for (std::size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    rows.push_back(sweep.measure(bytes));
    std::size_t next =
        o.stepBytes ? bytes + o.stepBytes : static_cast<std::size_t>(bytes * o.stepFactor);
    bytes = std::max(next, bytes + 1);
  }
  return rows;
}

}  // namespace hvd::bench
