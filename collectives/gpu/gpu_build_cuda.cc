#include <cuda_runtime_api.h>

#include "collectives/gpu/cuda_api.h"
#include "collectives/gpu/gpu_build.h"
#include "collectives/nccl/nccl_collectives.h"
#include "common/format.h"

namespace hvd::collectives::gpu {

GpuBuild gpuBuild(bool loadNccl) {
  GpuBuild b;
  b.cuda = true;
  b.nccl = true;
  b.cudaVersion = cudaVersionText();
  b.cudaToolkit = detail::concat(CUDART_VERSION / 1000, ".", CUDART_VERSION % 1000 / 10);
  b.ncclVersion = nccl::ncclVersionText(false);
  b.ncclVersionCode = NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH;
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    b.cudaDriver = detail::concat(driver / 1000, ".", driver % 1000 / 10);
  if (loadNccl) {
    try {
      b.ncclLibrary = nccl::ncclLibraryText();
    } catch (const std::exception& e) {
      b.ncclProblem = e.what();
    }
  }
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    b.deviceProblem = detail::concat("cudaGetDeviceCount: ", cudaGetErrorString(error));
    cudaGetLastError();
    return b;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, d) != cudaSuccess) {
      cudaGetLastError();
      b.devices.push_back(detail::concat("cuda:", d, " (its properties cannot be read)"));
      continue;
    }
    char bus[32] = {};
    cudaDeviceGetPCIBusId(bus, sizeof bus, d);
    b.devices.push_back(detail::concat("cuda:", d, " ", props.name, " (", bus, ", ",
                                       props.totalGlobalMem >> 30, " GiB)"));
  }
  if (count == 0) b.deviceProblem = "the CUDA driver reports no device";
  return b;
}

}  // namespace hvd::collectives::gpu
