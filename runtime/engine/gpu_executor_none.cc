// The GPU half of a build without CUDA: GPU tensors are refused with the reason.
#include "common/error.h"
#include "runtime/engine/gpu_executor.h"

namespace hvd::runtime {
namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw InvalidArgument(what +
                        ": this build of hvd has no GPU support (it was built without "
                        "CUDA and NCCL; hvdrun --check-build shows what was found)");
}

}  // namespace

std::shared_ptr<void> markReady(DeviceId device, void*, const std::string& what) {
  refuse(what + ": tensor on " + device.describe());
}

std::unique_ptr<GpuExecutor> makeGpuExecutor(const ExecutorOptions&, Timeline&) {
  refuse("GPU operation");
}

}  // namespace hvd::runtime
