#include "collectives/gpu/staged_collectives.h"

#include "common/error.h"

namespace hvd::collectives::gpu {

Tensor StagedCollectives::toHost(const Tensor& t, PinnedBuffer& buffer, cudaStream_t stream) {
  Tensor h{buffer.reserve(std::max<std::size_t>(t.bytes(), 1)), t.dtype, t.shape};
  if (t.bytes() > 0) {
    HVD_CUDA_CHECK(cudaMemcpyAsync(h.data, t.data, t.bytes(), cudaMemcpyDeviceToHost, stream),
                   "host staging: copy to host");
    // Bounded: the stream may hold work that waits on a peer (the caller's, or NCCL's in a
    // hierarchical allreduce).
    gpu::synchronize(stream, host_.deadline(), "host staging: copy to host");
  }
  return h;
}

void StagedCollectives::toDevice(const Tensor& h, void* device, cudaStream_t stream) {
  if (h.bytes() == 0) return;
  HVD_CUDA_CHECK(cudaMemcpyAsync(device, h.data, h.bytes(), cudaMemcpyHostToDevice, stream),
                 "host staging: copy to the GPU");
  // The pinned buffer is reused by the next operation: the copy must be done with it first.
  gpu::synchronize(stream, host_.deadline(), "host staging: copy to the GPU");
}

Allocate StagedCollectives::stagedOutput(DType dtype) {
  return [this, dtype](const std::vector<int64_t>& shape) -> void* {
    Tensor sized{nullptr, dtype, shape};
    return out_.reserve(std::max<std::size_t>(sized.bytes(), 1));
  };
}

Tensor StagedCollectives::onDevice(const Tensor& host, const Allocate& allocate,
                                   cudaStream_t stream) {
  Tensor device{allocate(host.shape), host.dtype, host.shape};
  toDevice(host, device.data, stream);
  return device;
}

void StagedCollectives::allreduce(const Tensor& input, const Tensor& output, ReduceOp op,
                                  const AllreduceOptions& options, cudaStream_t stream) {
  Tensor h = toHost(input, in_, stream);
  collectives::allreduce(host_, h, h, op, options);
  toDevice(h, output.data, stream);
}

void StagedCollectives::broadcast(const Tensor& tensor, int root, cudaStream_t stream) {
  Tensor h = host_.rank() == root ? toHost(tensor, in_, stream)
                                  : Tensor{in_.reserve(std::max<std::size_t>(tensor.bytes(), 1)),
                                           tensor.dtype, tensor.shape};
  collectives::broadcast(host_, h, root);
  if (host_.rank() != root) toDevice(h, tensor.data, stream);
}

Tensor StagedCollectives::allgather(const Tensor& input, const Allocate& allocate,
                                    cudaStream_t stream) {
  Tensor h = toHost(input, in_, stream);
  Tensor out = collectives::allgather(host_, h, stagedOutput(input.dtype));
  return onDevice(out, allocate, stream);
}

AlltoallResult StagedCollectives::alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                                           const Allocate& allocate, cudaStream_t stream) {
  Tensor h = toHost(input, in_, stream);
  AlltoallResult r = collectives::alltoall(host_, h, splits, stagedOutput(input.dtype));
  r.output = onDevice(r.output, allocate, stream);
  return r;
}

Tensor StagedCollectives::reducescatter(const Tensor& input, ReduceOp op, const Allocate& allocate,
                                        cudaStream_t stream) {
  Tensor h = toHost(input, in_, stream);
  Tensor out = collectives::reducescatter(host_, h, op, stagedOutput(input.dtype));
  return onDevice(out, allocate, stream);
}

void StagedCollectives::synchronize(cudaStream_t stream, Deadline deadline,
                                    const std::string& what) {
  gpu::synchronize(stream, deadline, what);
}

}  // namespace hvd::collectives::gpu
