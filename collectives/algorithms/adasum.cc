#include "collectives/algorithms/adasum.h"

#include <array>
#include <cstring>
#include <vector>

#include "collectives/algorithms/half.h"
#include "collectives/algorithms/ring.h"
#include "collectives/algorithms/tags.h"
#include "common/error.h"

namespace hvd::collectives {
namespace {

// |a|^2 below this counts as a zero vector (Horovod's threshold): its side keeps coefficient 1.
constexpr double kZeroNorm = 1e-8;

template <typename T, typename F>
void fill(std::vector<T>& out, F&& element, double factor) {
  if (factor == 1.0) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(element(i));
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(element(i) * factor);
  }
}

// Values travel and are kept as float64 for float64 tensors and as float32 otherwise (half types
// widen once on the way in): the dot products always accumulate in float64. The dtype is
// switched on outside the loops, which then vectorise.
template <typename T>
std::vector<T> widened(const void* data, std::size_t n, DType dtype, double factor) {
  std::vector<T> out(n);
  const auto* u16 = static_cast<const uint16_t*>(data);
  const auto* f32 = static_cast<const float*>(data);
  const auto* f64 = static_cast<const double*>(data);
  switch (dtype) {
    case DType::Float16:
      fill(
          out, [&](std::size_t i) { return double{halfToFloat(u16[i])}; }, factor);
      break;
    case DType::BFloat16:
      fill(
          out, [&](std::size_t i) { return double{bf16ToFloat(u16[i])}; }, factor);
      break;
    case DType::Float32:
      fill(
          out, [&](std::size_t i) { return double{f32[i]}; }, factor);
      break;
    default:
      fill(
          out, [&](std::size_t i) { return f64[i]; }, factor);
      break;
  }
  return out;
}

template <typename T>
void narrowed(std::vector<T>& v, void* data, DType dtype, double factor) {
  if (factor != 1.0)
    for (auto& x : v) x = static_cast<T>(static_cast<double>(x) * factor);
  auto* u16 = static_cast<uint16_t*>(data);
  switch (dtype) {
    case DType::Float16:
      for (std::size_t i = 0; i < v.size(); ++i) u16[i] = floatToHalf(static_cast<float>(v[i]));
      break;
    case DType::BFloat16:
      for (std::size_t i = 0; i < v.size(); ++i) u16[i] = floatToBf16(static_cast<float>(v[i]));
      break;
    case DType::Float32:
      for (std::size_t i = 0; i < v.size(); ++i)
        static_cast<float*>(data)[i] = static_cast<float>(v[i]);
      break;
    default:
      std::memcpy(data, v.data(), v.size() * sizeof(T));
      break;
  }
}

// a.b, |a|^2 and |b|^2 in float64, in four interleaved partial sums each (one chain per sum
// would wait on the adder's latency for every element).
template <typename T>
std::array<double, 3> dotProducts(const T* a, const T* b, std::size_t n) {
  double ab[4] = {}, aa[4] = {}, bb[4] = {};
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) {
      double x = a[i + k], y = b[i + k];
      ab[k] += x * y;
      aa[k] += x * x;
      bb[k] += y * y;
    }
  for (; i < n; ++i) {
    double x = a[i], y = b[i];
    ab[0] += x * y;
    aa[0] += x * x;
    bb[0] += y * y;
  }
  return {(ab[0] + ab[1]) + (ab[2] + ab[3]), (aa[0] + aa[1]) + (aa[2] + aa[3]),
          (bb[0] + bb[1]) + (bb[2] + bb[3])};
}

template <typename T>
void exchange(Connection& partner, const T* send, std::size_t sendCount, T* recv,
              std::size_t recvCount, Tag tag, Deadline deadline) {
  Request in = partner.irecv(asWritableBytes(recv, recvCount * sizeof(T)), tag);
  Request out = partner.isend(asBytes(send, sendCount * sizeof(T)), tag);
  in.wait(deadline);
  out.wait(deadline);
}

}  // namespace

void checkAdasum(DType dtype, int ranks) {
  if (dtype != DType::Float16 && dtype != DType::BFloat16 && dtype != DType::Float32 &&
      dtype != DType::Float64)
    throw InvalidArgument(
        detail::concat("reduce op adasum combines float16, bfloat16, float32 "
                       "and float64 tensors, not ",
                       dtypeName(dtype)));
  if (ranks < 1 || (ranks & (ranks - 1)) != 0)
    throw InvalidArgument(
        detail::concat("reduce op adasum needs a power-of-two number of ranks "
                       "(as Horovod's); this one has ",
                       ranks));
}

namespace {

template <typename T>
void adasumTyped(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
                 double prescale, double postscale) {
  int n = comm.size(), r = comm.rank();
  std::vector<T> v = widened<T>(input, count, dtype, prescale);
  std::vector<T> other(count / 2 + 1);
  Tag dataTag = makeTag(TagPrefix::Allreduce, comm.nextSequence());
  Tag dotTag = makeTag(TagPrefix::Allreduce, comm.nextSequence());
  auto deadline = comm.deadline();
  std::vector<Segment> kept;  // the segment this rank kept at each level, for the way back
  Segment mine{0, count};
  for (int d = 1; d < n; d <<= 1) {
    Connection& partner = comm.peer(r ^ d);
    bool lower = (r & d) == 0;  // the lower half of the tree is `a`
    std::size_t firstLength = mine.count / 2;
    Segment first{mine.offset, firstLength};
    Segment second{mine.offset + firstLength, mine.count - firstLength};
    Segment keep = lower ? first : second, give = lower ? second : first;
    exchange(partner, v.data() + give.offset, give.count, other.data(), keep.count, dataTag,
             deadline);
    const T* own = v.data() + keep.offset;
    const T* theirs = other.data();
    const T* a = lower ? own : theirs;
    const T* b = lower ? theirs : own;
    std::array<double, 3> dots = dotProducts(a, b, keep.count);  // over this rank's piece
    // Summed over the 2d ranks that now hold the pieces of these two vectors. Each pair adds
    // the same two operands, so every rank of the group gets the same sums.
    for (int m = 1; m < 2 * d; m <<= 1) {
      std::array<double, 3> received{};
      exchange(comm.peer(r ^ m), dots.data(), 3, received.data(), 3, dotTag, deadline);
      for (int k = 0; k < 3; ++k) dots[k] = (r & m) ? received[k] + dots[k] : dots[k] + received[k];
    }
    double ca = dots[1] >= kZeroNorm ? 1.0 - dots[0] / (2.0 * dots[1]) : 1.0;
    double cb = dots[2] >= kZeroNorm ? 1.0 - dots[0] / (2.0 * dots[2]) : 1.0;
    // `own` aliases `result`; each element is read before it is written.
    T* result = v.data() + keep.offset;
    for (std::size_t i = 0; i < keep.count; ++i)
      result[i] = static_cast<T>(ca * static_cast<double>(a[i]) + cb * static_cast<double>(b[i]));
    kept.push_back(mine);
    mine = keep;
  }
  // Back down the tree: at each level partners swap the halves they kept.
  for (int level = static_cast<int>(kept.size()) - 1; level >= 0; --level) {
    int d = 1 << level;
    Segment whole = kept[static_cast<std::size_t>(level)];
    std::size_t firstLength = whole.count / 2;
    bool lower = (r & d) == 0;
    Segment theirs = lower ? Segment{whole.offset + firstLength, whole.count - firstLength}
                           : Segment{whole.offset, firstLength};
    exchange(comm.peer(r ^ d), v.data() + mine.offset, mine.count, v.data() + theirs.offset,
             theirs.count, dataTag, deadline);
    mine = whole;
  }
  narrowed<T>(v, output, dtype, postscale);
}

}  // namespace

void adasumAllreduce(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
                     double prescale, double postscale) {
  checkAdasum(dtype, comm.size());
  if (count == 0) return;
  if (dtype == DType::Float64)
    adasumTyped<double>(comm, input, output, count, dtype, prescale, postscale);
  else
    adasumTyped<float>(comm, input, output, count, dtype, prescale, postscale);
}

}  // namespace hvd::collectives
