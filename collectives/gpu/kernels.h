// The few kernels the GPU backends need around the collectives: many copies in one launch (the
// fusion buffer's in and out), and scaling (prescale, postscale, average).
// All calls only enqueue work on `stream`; they throw hvd::Error when the launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "collectives/algorithms/dtype.h"

namespace hvd::collectives::gpu {

struct CopyJob {
  const void* src;
  void* dst;
  std::size_t bytes;
};

// Jobs one kernel launch carries in its parameters (the launch limit is 4 KiB).
inline constexpr std::size_t kCopyJobsPerLaunch = 128;

// Runs every job, kCopyJobsPerLaunch per kernel launch instead of one cudaMemcpyAsync each.
// Jobs must not overlap.
void batchedCopy(const std::vector<CopyJob>& jobs, cudaStream_t stream);

// data[i] *= factor, rounded back to the dtype as collectives/algorithms/reduce.h's scale does
// (float16 and bfloat16 through float32; integers truncate toward zero). Not for bool.
void scaleOnDevice(void* data, std::size_t count, DType dtype, double factor, cudaStream_t stream);
// data[i] /= divisor as reduce.h's divide does (exact integer division for integer types).
void divideOnDevice(void* data, std::size_t count, DType dtype, int divisor, cudaStream_t stream);

}  // namespace hvd::collectives::gpu
