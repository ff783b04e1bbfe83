#include "collectives/algorithms/adasum.h"

#include <array>
#include <cstring>
#include <vector>

#include "collectives/algorithms/half.h"
#include "collectives/algorithms/tags.h"
#include "common/error.h"

namespace hvd::collectives {
namespace {

// |a|^2 below this counts as a zero vector (Horovod's threshold): its side keeps coefficient 1.
constexpr double kZeroNorm = 1e-8;

std::vector<double> toDoubles(const void* data, std::size_t n, DType dtype, double factor) {
  std::vector<double> out(n);
  const auto* u16 = static_cast<const uint16_t*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::Float16: out[i] = halfToFloat(u16[i]); break;
      case DType::BFloat16: out[i] = bf16ToFloat(u16[i]); break;
      case DType::Float32: out[i] = static_cast<const float*>(data)[i]; break;
      default: out[i] = static_cast<const double*>(data)[i]; break;
    }
    out[i] *= factor;
  }
  return out;
}

void fromDoubles(const std::vector<double>& v, void* data, DType dtype, double factor) {
  auto* u16 = static_cast<uint16_t*>(data);
  for (std::size_t i = 0; i < v.size(); ++i) {
    double x = v[i] * factor;
    switch (dtype) {
      case DType::Float16: u16[i] = floatToHalf(static_cast<float>(x)); break;
      case DType::BFloat16: u16[i] = floatToBf16(static_cast<float>(x)); break;
      case DType::Float32: static_cast<float*>(data)[i] = static_cast<float>(x); break;
      default: static_cast<double*>(data)[i] = x; break;
    }
  }
}

struct Segment {
  std::size_t start = 0, length = 0;
};

void exchange(Connection& partner, const double* send, std::size_t sendCount, double* recv,
              std::size_t recvCount, Tag tag, Deadline deadline) {
  Request in = partner.irecv(asWritableBytes(recv, recvCount * sizeof(double)), tag);
  Request out = partner.isend(asBytes(send, sendCount * sizeof(double)), tag);
  in.wait(deadline);
  out.wait(deadline);
}

}  // namespace

void checkAdasum(DType dtype, int ranks) {
  if (dtype != DType::Float16 && dtype != DType::BFloat16 && dtype != DType::Float32 &&
      dtype != DType::Float64)
    throw InvalidArgument(detail::concat("reduce op adasum combines float16, bfloat16, float32 "
                                         "and float64 tensors, not ", dtypeName(dtype)));
  if (ranks < 1 || (ranks & (ranks - 1)) != 0)
    throw InvalidArgument(detail::concat("reduce op adasum needs a power-of-two number of ranks "
                                         "(as Horovod's); this one has ", ranks));
}

void adasumAllreduce(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
                     double prescale, double postscale) {
  int n = comm.size(), r = comm.rank();
  checkAdasum(dtype, n);
  if (count == 0) return;
  std::vector<double> v = toDoubles(input, count, dtype, prescale);
  std::vector<double> other(count / 2 + 1);
  Tag dataTag = makeTag(TagPrefix::Allreduce, comm.nextSequence());
  Tag dotTag = makeTag(TagPrefix::Allreduce, comm.nextSequence());
  auto deadline = comm.deadline();
  std::vector<Segment> kept;  // the segment this rank kept at each level, for the way back
  Segment mine{0, count};
  for (int d = 1; d < n; d <<= 1) {
    Connection& partner = comm.peer(r ^ d);
    bool lower = (r & d) == 0;  // the lower half of the tree is `a`
    std::size_t firstLength = mine.length / 2;
    Segment first{mine.start, firstLength};
    Segment second{mine.start + firstLength, mine.length - firstLength};
    Segment keep = lower ? first : second, give = lower ? second : first;
    exchange(partner, v.data() + give.start, give.length, other.data(), keep.length, dataTag,
             deadline);
    const double* own = v.data() + keep.start;
    const double* theirs = other.data();
    const double* a = lower ? own : theirs;
    const double* b = lower ? theirs : own;
    std::array<double, 3> dots{0, 0, 0};  // a.b, |a|^2, |b|^2 over this rank's piece
    for (std::size_t i = 0; i < keep.length; ++i) {
      dots[0] += a[i] * b[i];
      dots[1] += a[i] * a[i];
      dots[2] += b[i] * b[i];
    }
    // Summed over the 2d ranks that now hold the pieces of these two vectors. Each pair adds
    // the same two operands, so every rank of the group gets the same sums.
    for (int m = 1; m < 2 * d; m <<= 1) {
      std::array<double, 3> received{};
      exchange(comm.peer(r ^ m), dots.data(), 3, received.data(), 3, dotTag, deadline);
      for (int k = 0; k < 3; ++k) dots[k] = (r & m) ? received[k] + dots[k] : dots[k] + received[k];
    }
    double ca = dots[1] >= kZeroNorm ? 1.0 - dots[0] / (2.0 * dots[1]) : 1.0;
    double cb = dots[2] >= kZeroNorm ? 1.0 - dots[0] / (2.0 * dots[2]) : 1.0;
    double* result = v.data() + keep.start;
    for (std::size_t i = 0; i < keep.length; ++i) result[i] = ca * a[i] + cb * b[i];
    kept.push_back(mine);
    mine = keep;
  }
  // Back down the tree: at each level partners swap the halves they kept.
  for (int level = static_cast<int>(kept.size()) - 1; level >= 0; --level) {
    int d = 1 << level;
    Segment whole = kept[static_cast<std::size_t>(level)];
    std::size_t firstLength = whole.length / 2;
    bool lower = (r & d) == 0;
    Segment theirs = lower ? Segment{whole.start + firstLength, whole.length - firstLength}
                           : Segment{whole.start, firstLength};
    exchange(comm.peer(r ^ d), v.data() + mine.start, mine.length, v.data() + theirs.start,
             theirs.length, dataTag, deadline);
    mine = whole;
  }
  fromDoubles(v, output, dtype, postscale);
}

}  // namespace hvd::collectives
