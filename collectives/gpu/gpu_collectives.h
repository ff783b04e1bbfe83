// The collectives on tensors in GPU memory: a backend beside the host algorithms of
// collectives/operations.h, with the same operations and checks. Two implementations:
// NcclCollectives (collectives/nccl/, GPU to GPU) and StagedCollectives (through host memory and
// the host algorithms, for when NCCL cannot serve).
//
// Every call only queues work on `stream` (the caller orders the stream after the work that
// produced the inputs); results are ready once synchronize() returns. Calls that need metadata
// from the peers (allgather's and alltoall's rows) exchange it over the host communicator first,
// so they block for that exchange. Every rank of the communicator must make the same calls in
// the same order. Errors: InvalidArgument for what the ranks disagree on (as the host versions),
// hvd::Error naming the operation and the CUDA/NCCL error otherwise.
// Thread model: one thread (the engine's) at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "collectives/operations.h"

namespace hvd::collectives::gpu {

class GpuCollectives {
 public:
  virtual ~GpuCollectives() = default;
  virtual const char* name() const = 0;  // "nccl", "host-staged": shown in the timeline and logs

  // `output` may be `input`. Average divides as the host version does; prescale and postscale
  // apply around the reduction.
  virtual void allreduce(const Tensor& input, const Tensor& output, ReduceOp op,
                         const AllreduceOptions& options, cudaStream_t stream) = 0;
  virtual void broadcast(const Tensor& tensor, int root, cudaStream_t stream) = 0;
  // `allocate` returns device memory on this backend's device.
  virtual Tensor allgather(const Tensor& input, const Allocate& allocate, cudaStream_t stream) = 0;
  virtual AlltoallResult alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                                  const Allocate& allocate, cudaStream_t stream) = 0;
  virtual Tensor reducescatter(const Tensor& input, ReduceOp op, const Allocate& allocate,
                               cudaStream_t stream) = 0;
  // Waits for everything queued on `stream`; a hung or failed collective ends in an hvd::Error
  // (TimeoutError past `deadline`) naming `what`, after the backend has aborted its work.
  virtual void synchronize(cudaStream_t stream, Deadline deadline, const std::string& what) = 0;
  // Stops this backend's queued work that may never finish (a peer stopped): called when a wait
  // on a stream it shares with another backend ended in an error. Nothing for backends whose
  // GPU work never waits on a peer.
  virtual void abandon() {}
};

}  // namespace hvd::collectives::gpu
