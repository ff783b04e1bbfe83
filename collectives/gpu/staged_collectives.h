// GPU tensors through host memory: each operation copies its input to page-locked host memory,
// runs the host algorithm over the TCP communicator, and copies the result back. The fallback
// when NCCL cannot serve: hvd built without NCCL, several ranks sharing one GPU (NCCL refuses
// that), or a dtype NCCL has no type for (16-bit integer reductions).
// Thread model: one thread at a time; it shares `host` with the caller's other uses, in order.
#pragma once

#include "collectives/gpu/cuda_api.h"
#include "collectives/gpu/gpu_collectives.h"

namespace hvd::collectives::gpu {

class StagedCollectives : public GpuCollectives {
 public:
  StagedCollectives(Comm& host, int device) : host_(host), device_(device) {}
  const char* name() const override { return "host-staged"; }

  void allreduce(const Tensor& input, const Tensor& output, ReduceOp op,
                 const AllreduceOptions& options, cudaStream_t stream) override;
  void broadcast(const Tensor& tensor, int root, cudaStream_t stream) override;
  Tensor allgather(const Tensor& input, const Allocate& allocate, cudaStream_t stream) override;
  AlltoallResult alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                          const Allocate& allocate, cudaStream_t stream) override;
  Tensor reducescatter(const Tensor& input, ReduceOp op, const Allocate& allocate,
                       cudaStream_t stream) override;
  void synchronize(cudaStream_t stream, Deadline deadline, const std::string& what) override;

 private:
  // Copies `t` to the staging buffer and waits for the copy; returns the host tensor.
  Tensor toHost(const Tensor& t, PinnedBuffer& buffer, cudaStream_t stream);
  void toDevice(const Tensor& host, void* device, cudaStream_t stream);
  // The host collectives' output allocator: the second staging buffer.
  Allocate stagedOutput(DType dtype);
  // A host result copied into device memory from `allocate`.
  Tensor onDevice(const Tensor& host, const Allocate& allocate, cudaStream_t stream);

  Comm& host_;
  int device_;
  PinnedBuffer in_, out_;
};

}  // namespace hvd::collectives::gpu
