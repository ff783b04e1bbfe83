// Typed element access through doubles, and inputs filled from rank and index so that every
// collective's expected result has a closed form. Shared by hvd-bench's result check and the
// correctness tests, so one body covers every dtype (the test-support library, hvd_test_support).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "collectives/algorithms/dtype.h"
#include "collectives/algorithms/half.h"

namespace hvd::test {

using collectives::DType;

inline void setElement(void* buf, DType t, std::size_t i, double v) {
  using namespace collectives;
  if (withNativeType(buf, t, [&](auto* p) { p[i] = static_cast<std::decay_t<decltype(*p)>>(v); }))
    return;
  if (t == DType::Bool)
    static_cast<uint8_t*>(buf)[i] = v != 0;
  else
    static_cast<uint16_t*>(buf)[i] = t == DType::Float16 ? floatToHalf(static_cast<float>(v))
                                                         : floatToBf16(static_cast<float>(v));
}

inline double getElement(const void* buf, DType t, std::size_t i) {
  using namespace collectives;
  double out = NAN;
  // withNativeType takes a mutable pointer; this only reads through it.
  if (withNativeType(const_cast<void*>(buf), t, [&](auto* p) { out = static_cast<double>(p[i]); }))
    return out;
  if (t == DType::Bool) return static_cast<const uint8_t*>(buf)[i];
  uint16_t bits = static_cast<const uint16_t*>(buf)[i];
  return t == DType::Float16 ? halfToFloat(bits) : bf16ToFloat(bits);
}

inline bool isFloating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

inline double tolerance(DType t) {
  switch (t) {
    case DType::Float16:
      return 2e-3;
    case DType::BFloat16:
      return 1.6e-2;
    case DType::Float32:
      return 1e-6;
    case DType::Float64:
      return 1e-12;
    default:
      return 0;
  }
}

inline bool close(double got, double want, DType t) {
  return std::fabs(got - want) <= tolerance(t) * std::max(1.0, std::fabs(want));
}

// Rank `rank`'s input element i for a reduction with `op`: small integers so every sum, product
// and average over up to 21 ranks is exact in every dtype. int8 is the limit: a sum reaches
// 3 * (7 + 2*7 + 3*7) = 126 at 21 ranks, a product 2^6 (every fourth rank gives a factor 2).
inline double fillValue(DType t, collectives::ReduceOp op, int rank, std::size_t i) {
  if (t == DType::Bool) return (i + rank) % 3 == 0;
  if (op == collectives::ReduceOp::Product) return (rank + i) % 4 == 1 ? 2 : 1;
  // Adasum of equal vectors is that vector, exactly (each coefficient is 1/2).
  if (op == collectives::ReduceOp::Adasum) return static_cast<double>(i % 3 + 1);
  return (rank % 3 + 1) * static_cast<double>(i % 3 + 1);
}

// op over ranks 0..n-1 of fillValue, as hvd defines it (integer Average truncates).
inline double expectedValue(DType t, collectives::ReduceOp op, int n, std::size_t i) {
  using collectives::ReduceOp;
  double acc = fillValue(t, op, 0, i);
  if (op == ReduceOp::Adasum) return acc;
  for (int r = 1; r < n; ++r) {
    double v = fillValue(t, op, r, i);
    if (t == DType::Bool)
      acc = (op == ReduceOp::Sum || op == ReduceOp::Max) ? (acc || v) : (acc && v);
    else if (op == ReduceOp::Min)
      acc = std::min(acc, v);
    else if (op == ReduceOp::Max)
      acc = std::max(acc, v);
    else if (op == ReduceOp::Product)
      acc *= v;
    else
      acc += v;
  }
  if (op == ReduceOp::Average) acc = isFloating(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

}  // namespace hvd::test
