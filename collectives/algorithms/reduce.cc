#include "collectives/algorithms/reduce.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "collectives/algorithms/half.h"
#include "collectives/transport/work_meter.h"
#include "common/error.h"

namespace hvd::collectives {
namespace {

// Tight loops over restrict pointers so -O3 vectorises them; dst may alias a (in place).
template <typename T, typename F>
void apply(T* dst, const T* a, const T* __restrict b, std::size_t n, F f) {
  if (dst == a) {
    T* __restrict d = dst;
    for (std::size_t i = 0; i < n; ++i) d[i] = f(d[i], b[i]);
  } else {
    T* __restrict d = dst;
    const T* __restrict x = a;
    for (std::size_t i = 0; i < n; ++i) d[i] = f(x[i], b[i]);
  }
}

template <typename T>
void reduceTyped(T* dst, const T* a, const T* b, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average:
      return apply(dst, a, b, n, [](T x, T y) { return static_cast<T>(x + y); });
    case ReduceOp::Min:
      return apply(dst, a, b, n, [](T x, T y) { return std::min(x, y); });
    case ReduceOp::Max:
      return apply(dst, a, b, n, [](T x, T y) { return std::max(x, y); });
    case ReduceOp::Product:
      return apply(dst, a, b, n, [](T x, T y) { return static_cast<T>(x * y); });
    case ReduceOp::Adasum:
      break;  // refused by checkReducible
  }
}

// Converts blocks to float32, reduces there, converts back: one rounding per reduction step.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void reduceHalf(uint16_t* dst, const uint16_t* x, const uint16_t* y, std::size_t n, ReduceOp op) {
  constexpr std::size_t kBlock = 256;
  float a[kBlock], b[kBlock];
  for (std::size_t start = 0; start < n; start += kBlock) {
    std::size_t m = std::min(kBlock, n - start);
    for (std::size_t i = 0; i < m; ++i) {
      a[i] = ToFloat(x[start + i]);
      b[i] = ToFloat(y[start + i]);
    }
    reduceTyped(a, a, b, m, op);
    for (std::size_t i = 0; i < m; ++i) dst[start + i] = FromFloat(a[i]);
  }
}

#if defined(__x86_64__)
// float16 through the CPU's F16C conversions, 8 lanes at a time; chosen at run time when the CPU
// has F16C (reduceHalf above is the portable path and handles the tail).
__attribute__((target("f16c,avx"))) void reduceHalfF16c(uint16_t* dst, const uint16_t* x,
                                                        const uint16_t* y, std::size_t n,
                                                        ReduceOp op) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    __m256 c;
    switch (op) {
      case ReduceOp::Min:
        c = _mm256_min_ps(a, b);
        break;
      case ReduceOp::Max:
        c = _mm256_max_ps(a, b);
        break;
      case ReduceOp::Product:
        c = _mm256_mul_ps(a, b);
        break;
      default:
        c = _mm256_add_ps(a, b);
        break;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT));
  }
  reduceHalf<halfToFloat, floatToHalf>(dst + i, x + i, y + i, n - i, op);
}

// F16C from CPUID itself: clang before 16 has no "f16c" for __builtin_cpu_supports. "avx" also
// checks that the OS saves the AVX registers.
bool cpuHasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0 &&
           __builtin_cpu_supports("avx");
  }();
  return has;
}
#endif

void reduceFloat16(uint16_t* dst, const uint16_t* x, const uint16_t* y, std::size_t n,
                   ReduceOp op) {
#if defined(__x86_64__)
  if (cpuHasF16c()) return reduceHalfF16c(dst, x, y, n, op);
#endif
  reduceHalf<halfToFloat, floatToHalf>(dst, x, y, n, op);
}

void reduceBool(uint8_t* dst, const uint8_t* x, const uint8_t* y, std::size_t n, ReduceOp op) {
  // Sum and Max are logical or; Min and Product are logical and.
  if (op == ReduceOp::Sum || op == ReduceOp::Max)
    apply(dst, x, y, n, [](uint8_t a, uint8_t b) -> uint8_t { return (a | b) != 0; });
  else
    apply(dst, x, y, n, [](uint8_t a, uint8_t b) -> uint8_t { return (a && b) ? 1 : 0; });
}

template <typename T>
void scaleTyped(T* data, std::size_t n, double factor) {
  if constexpr (std::is_floating_point_v<T>) {
    // In the tensor's own precision, with the factor rounded to it, as Horovod scales: the
    // same bits as a framework's `tensor * factor` (integers are scaled in double).
    const T f = static_cast<T>(factor);
    for (std::size_t i = 0; i < n; ++i) data[i] *= f;
  } else {
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<T>(data[i] * factor);
  }
}

template <typename T>
void divideTyped(T* data, std::size_t n, int divisor) {
  // Dividing by a power of two and multiplying by its reciprocal round the same exact value,
  // so the results are identical, and a multiply is several times cheaper than a vector
  // divide (Average over 2, 4, 8 ... ranks).
  if constexpr (std::is_floating_point_v<T>) {
    if ((divisor & (divisor - 1)) == 0) {
      const T reciprocal = T(1) / static_cast<T>(divisor);
      for (std::size_t i = 0; i < n; ++i) data[i] *= reciprocal;
      return;
    }
  }
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
}

}  // namespace

void checkReducible(DType dtype, ReduceOp op) {
  if (op == ReduceOp::Adasum)
    throw InvalidArgument("reduce op adasum combines whole vectors; only allreduce offers it");
  if (dtype == DType::Bool && op == ReduceOp::Average)
    throw InvalidArgument("reduce op average is not defined for dtype bool");
}

void reduceInto(void* dst, const void* src, std::size_t n, DType dtype, ReduceOp op) {
  reduce(dst, dst, src, n, dtype, op);
}

void reduce(void* dst, const void* a, const void* b, std::size_t n, DType dtype, ReduceOp op) {
  checkReducible(dtype, op);
  if (skipReduction(n * dtypeSize(dtype))) return;
  switch (dtype) {
#define HVD_REDUCE_CASE(code, T)                                                                 \
  case DType::code:                                                                              \
    return reduceTyped(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), \
                       n, op);
    HVD_REDUCE_CASE(UInt8, uint8_t)
    HVD_REDUCE_CASE(Int8, int8_t)
    HVD_REDUCE_CASE(UInt16, uint16_t)
    HVD_REDUCE_CASE(Int16, int16_t)
    HVD_REDUCE_CASE(Int32, int32_t)
    HVD_REDUCE_CASE(Int64, int64_t)
    HVD_REDUCE_CASE(Float32, float)
    HVD_REDUCE_CASE(Float64, double)
#undef HVD_REDUCE_CASE
    case DType::Float16:
      return reduceFloat16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                           static_cast<const uint16_t*>(b), n, op);
    case DType::BFloat16:
      return reduceHalf<bf16ToFloat, floatToBf16>(static_cast<uint16_t*>(dst),
                                                  static_cast<const uint16_t*>(a),
                                                  static_cast<const uint16_t*>(b), n, op);
    case DType::Bool:
      return reduceBool(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                        static_cast<const uint8_t*>(b), n, op);
  }
}

namespace {

void scaleValues(void* data, std::size_t n, DType dtype, double factor) {
  if (withNativeType(data, dtype, [&](auto* p) { scaleTyped(p, n, factor); })) return;
  auto* p = static_cast<uint16_t*>(data);
  bool half = dtype == DType::Float16;
  const auto f = static_cast<float>(factor);  // float math, as Horovod's CPU path
  for (std::size_t i = 0; i < n; ++i) {
    float v = (half ? halfToFloat(p[i]) : bf16ToFloat(p[i])) * f;
    p[i] = half ? floatToHalf(v) : floatToBf16(v);
  }
}

}  // namespace

void scale(void* data, std::size_t n, DType dtype, double factor) {
  if (dtype == DType::Bool) throw InvalidArgument("cannot scale a bool tensor");
  if (skipReduction(n * dtypeSize(dtype))) return;
  scaleValues(data, n, dtype, factor);
}

void divide(void* data, std::size_t n, DType dtype, int divisor) {
  if (dtype == DType::Bool) throw InvalidArgument("average is not defined for dtype bool");
  if (skipReduction(n * dtypeSize(dtype))) return;
  if (withNativeType(data, dtype, [&](auto* p) { divideTyped(p, n, divisor); })) return;
  scaleValues(data, n, dtype, 1.0 / divisor);  // float16, bfloat16
}

void finishAllreduce(void* data, std::size_t n, DType dtype, ReduceOp op, int ranks,
                     double postscale) {
  if (op == ReduceOp::Average && ranks > 1) divide(data, n, dtype, ranks);
  if (postscale != 1.0) scale(data, n, dtype, postscale);
}

}  // namespace hvd::collectives
