// What this build of hvd can do with GPU tensors and what this machine offers it, for
// `hvdrun --check-build` and the Python package's build_info(). Never throws: what is missing is
// said in the fields.
#pragma once

#include <string>
#include <vector>

namespace hvd::collectives::gpu {

struct GpuBuild {
  bool cuda = false;        // built with the CUDA toolkit
  bool nccl = false;        // built with NCCL's headers (the library is loaded at run time)
  std::string cudaVersion;  // "CUDA 13.0 (driver supports 13.0)"; empty without CUDA
  std::string cudaToolkit;  // "13.0": the toolkit built with
  std::string ncclVersion;  // "NCCL 2.28.9 (headers)"; empty without NCCL
  int ncclVersionCode = 0;  // 22809 for 2.28.9 (Horovod's nccl_built()); 0 without NCCL
  std::string cudaDriver;   // "13.0": the newest CUDA the driver supports; empty: no driver
  std::vector<std::string> devices;  // "cuda:0 NVIDIA H100 80GB HBM3 (0000:00:06.0, 79 GiB)"
  std::string deviceProblem;  // why no device is usable (the CUDA error); empty when some are
  std::string ncclLibrary;    // with loadNccl: "2.28.3 from libnccl.so.2"
  std::string ncclProblem;    // with loadNccl: why the NCCL library could not be loaded
};

// With `loadNccl`, also loads the NCCL library (as the first GPU collective would) to report
// its version and path, or why it cannot be loaded.
GpuBuild gpuBuild(bool loadNccl);

}  // namespace hvd::collectives::gpu
