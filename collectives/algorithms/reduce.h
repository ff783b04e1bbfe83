// Element-wise reduction kernels: dst[i] = op(dst[i], src[i]). float16 and bfloat16 are
// accumulated in float32. Average reduces as Sum; the caller divides (scale()).
#pragma once

#include <cstddef>

#include "collectives/algorithms/dtype.h"

namespace hvd::collectives {

// Throws InvalidArgument for a combination that has no meaning (e.g. Product of bool is allowed
// as logical and; Average of bool is not).
void reduceInto(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);
// dst[i] = op(a[i], b[i]); dst may be a (then this is reduceInto), but must not overlap b.
// Lets an out-of-place collective reduce from its input without copying it first.
void reduce(void* dst, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op);
// data[i] *= factor (rounded back to the dtype; integers truncate toward zero).
void scale(void* data, std::size_t count, DType dtype, double factor);
// data[i] /= divisor: exact integer division (toward zero) for integer types, so that an
// Average of integers is what the user computes by hand; true division for floating point.
void divide(void* data, std::size_t count, DType dtype, int divisor);
// What every allreduce does to its reduced result: Average divides by the `ranks` that
// contributed, then the postscale applies. One place, so the collective and the engine's
// coordinator-side reduction cannot drift apart.
void finishAllreduce(void* data, std::size_t count, DType dtype, ReduceOp op, int ranks,
                     double postscale);
void checkReducible(DType dtype, ReduceOp op);

}  // namespace hvd::collectives
