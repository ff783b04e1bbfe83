// Batched copy: block (x, y) copies the x-th slice of job y; 16-byte words where source,
// destination and size allow it, bytes otherwise. Scale/divide: one grid-stride loop per dtype.
#include "collectives/gpu/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "collectives/gpu/cuda_api.h"
#include "common/error.h"

namespace hvd::collectives::gpu {
namespace {

struct CopyBatch {
  CopyJob jobs[kCopyJobsPerLaunch];
};

constexpr int kThreads = 256;
constexpr std::size_t kSliceBytes = 64 * 1024;  // per block

__global__ void batchedCopyKernel(CopyBatch batch) {
  const CopyJob job = batch.jobs[blockIdx.y];
  std::size_t begin = static_cast<std::size_t>(blockIdx.x) * kSliceBytes;
  if (begin >= job.bytes) return;
  std::size_t end = min(job.bytes, begin + kSliceBytes);
  const auto* src = static_cast<const unsigned char*>(job.src);
  auto* dst = static_cast<unsigned char*>(job.dst);
  bool wide =
      ((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) % 16) == 0;
  std::size_t i = begin;
  if (wide) {
    std::size_t words = (end - begin) / 16;
    const auto* s = reinterpret_cast<const uint4*>(src + begin);
    auto* d = reinterpret_cast<uint4*>(dst + begin);
    for (std::size_t w = threadIdx.x; w < words; w += blockDim.x) d[w] = s[w];
    i = begin + words * 16;
  }
  for (i += threadIdx.x; i < end; i += blockDim.x) dst[i] = src[i];
}

// The same arithmetic as the host's collectives::scale, so a tensor scaled on either side has
// the same bits: floating types in their own precision with the factor rounded to it (as
// Horovod and a framework's `tensor * factor`), integers in double, halves in float.
template <typename T, typename Factor>
__global__ void scaleKernel(T* data, std::size_t n, Factor factor) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = static_cast<T>(data[i] * factor);
}

__global__ void scaleHalfKernel(__half* data, std::size_t n, float factor) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = __float2half(__half2float(data[i]) * factor);
}

__global__ void scaleBf16Kernel(__nv_bfloat16* data, std::size_t n, float factor) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = __float2bfloat16(__bfloat162float(data[i]) * factor);
}

template <typename T>
__global__ void divideKernel(T* data, std::size_t n, int divisor) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
}

unsigned blocksFor(std::size_t n) {
  return static_cast<unsigned>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 4096));
}

void checkLaunch(const char* kernel) { checkCuda(cudaGetLastError(), kernel, "kernel launch"); }

}  // namespace

void batchedCopy(const std::vector<CopyJob>& jobs, cudaStream_t stream) {
  for (std::size_t first = 0; first < jobs.size(); first += kCopyJobsPerLaunch) {
    std::size_t n = std::min(kCopyJobsPerLaunch, jobs.size() - first);
    CopyBatch batch{};
    std::size_t largest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      batch.jobs[i] = jobs[first + i];
      largest = std::max(largest, jobs[first + i].bytes);
    }
    if (largest == 0) continue;
    dim3 grid(static_cast<unsigned>((largest + kSliceBytes - 1) / kSliceBytes),
              static_cast<unsigned>(n));
    batchedCopyKernel<<<grid, kThreads, 0, stream>>>(batch);
    checkLaunch("batchedCopyKernel");
  }
}

void scaleOnDevice(void* data, std::size_t n, DType dtype, double factor, cudaStream_t stream) {
  if (n == 0) return;
  if (withNativeType(data, dtype, [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_floating_point_v<T>)
          scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, n, static_cast<T>(factor));
        else
          scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, n, factor);
      })) {
  } else if (dtype == DType::Float16) {
    scaleHalfKernel<<<blocksFor(n), kThreads, 0, stream>>>(static_cast<__half*>(data), n,
                                                           static_cast<float>(factor));
  } else if (dtype == DType::BFloat16) {
    scaleBf16Kernel<<<blocksFor(n), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), n,
                                                           static_cast<float>(factor));
  } else {
    throw InvalidArgument("cannot scale a bool tensor");
  }
  checkLaunch("scaleKernel");
}

void divideOnDevice(void* data, std::size_t n, DType dtype, int divisor, cudaStream_t stream) {
  if (n == 0) return;
  if (dtype == DType::Bool) throw InvalidArgument("average is not defined for dtype bool");
  if (!withNativeType(data, dtype, [&](auto* p) {
        divideKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, n, divisor);
      }))
    return scaleOnDevice(data, n, dtype, 1.0 / divisor, stream);  // float16, bfloat16
  checkLaunch("divideKernel");
}

}  // namespace hvd::collectives::gpu
