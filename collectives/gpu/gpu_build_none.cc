// gpu_build.h for a build without CUDA: nothing built, nothing looked for.
#include "collectives/gpu/gpu_build.h"

namespace hvd::collectives::gpu {

GpuBuild gpuBuild(bool) { return {}; }

}  // namespace hvd::collectives::gpu
