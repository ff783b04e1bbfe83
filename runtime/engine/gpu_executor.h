// The executor's GPU half: operations whose tensors live on a CUDA device. Built with CUDA and
// NCCL (gpu_executor_cuda.cc), or as a stub that refuses GPU tensors (gpu_executor_none.cc);
// nothing outside those two files sees CUDA.
//
// Order on the GPU: at submission, markReady() records an event on the caller's stream (for
// PyTorch, its current stream); the executor's own stream waits for that event, so the
// collective reads the inputs only after the work that produced them, without a device-wide
// synchronisation. A handle completes once the collective's GPU work has finished, so its
// outputs may be used on any stream.
//
// Backend per communicator (process set) and device, chosen collectively on its first GPU
// operation: NCCL when HVD_GPU_BACKEND=nccl and every rank has a GPU of its own; otherwise host
// staging through the TCP algorithms, with one warning that says why. uint16 and int16
// reductions (NCCL has no 16-bit integers) are staged always. With HVD_HIERARCHICAL_ALLREDUCE
// and NCCL, Sum and Average allreduces run hierarchically
// (collectives/gpu/hierarchical_collectives.h) when there are several hosts with as many ranks
// each. Thread model: the engine thread, except markReady (the submitting thread).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectives/transport/comm.h"
#include "runtime/engine/executor_options.h"
#include "runtime/engine/local_op.h"
#include "runtime/engine/messages.h"
#include "runtime/engine/timeline.h"

namespace hvd::runtime {

// Records where `stream` (a cudaStream_t; null: the legacy default stream) is on `device`.
// Throws InvalidArgument naming the device when this build has no CUDA or the device does not
// exist.
std::shared_ptr<void> markReady(DeviceId device, void* stream, const std::string& what);

struct ExecutorCounters;

class GpuExecutor {
 public:
  virtual ~GpuExecutor() = default;
  // As Executor::run, for operations on `device`.
  virtual void run(const Response& response, const std::vector<LocalOp*>& ops,
                   collectives::Comm& comm, DeviceId device, ExecutorCounters& counters) = 0;
  // `comm` is going away (a process set was removed): drop its backends.
  virtual void forget(const collectives::Comm* comm) = 0;
};

// Throws InvalidArgument when this build has no GPU support.
std::unique_ptr<GpuExecutor> makeGpuExecutor(const ExecutorOptions& options, Timeline& timeline);

}  // namespace hvd::runtime
