#include "collectives/gpu/hierarchical_collectives.h"

#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/ring.h"
#include "collectives/gpu/kernels.h"
#include "common/error.h"

namespace hvd::collectives::gpu {

HierarchicalCollectives::HierarchicalCollectives(std::unique_ptr<Comm> localComm,
                                                 std::unique_ptr<Comm> crossComm,
                                                 std::unique_ptr<GpuCollectives> local,
                                                 std::unique_ptr<GpuCollectives> flat, int device,
                                                 int worldSize)
    : localComm_(std::move(localComm)),
      crossComm_(std::move(crossComm)),
      local_(std::move(local)),
      flat_(std::move(flat)),
      cross_(*crossComm_, device),
      worldSize_(worldSize) {}

// The backends go before the communicators they run on.
HierarchicalCollectives::~HierarchicalCollectives() {
  flat_.reset();
  local_.reset();
}

void HierarchicalCollectives::allreduce(const Tensor& input, const Tensor& output, ReduceOp op,
                                        const AllreduceOptions& options, cudaStream_t stream) {
  if (op != ReduceOp::Sum && op != ReduceOp::Average) {
    flat_->allreduce(input, output, op, options, stream);
    return;
  }
  checkSameElements("allreduce", input, output);
  checkReducible(input.dtype, op);
  std::size_t n = input.numElements();
  if (n == 0) return;
  std::size_t elementSize = dtypeSize(input.dtype);
  auto* base = static_cast<std::byte*>(output.data);
  if (input.data != output.data)
    HVD_CUDA_CHECK(
        cudaMemcpyAsync(output.data, input.data, input.bytes(), cudaMemcpyDeviceToDevice, stream),
        "hierarchical allreduce: input to output");
  if (options.prescale != 1.0) scaleOnDevice(output.data, n, input.dtype, options.prescale, stream);
  // The stages sum; the world's average is taken once, on this rank's part.
  ReduceOp stageOp = op == ReduceOp::Average ? ReduceOp::Sum : op;
  Tensor whole{output.data, input.dtype, {static_cast<int64_t>(n)}};
  Blocks parts = evenBlocks(n, localComm_->size());
  int me = localComm_->rank();
  Tensor part{base + parts.offsets[me] * elementSize,
              input.dtype,
              {static_cast<int64_t>(parts.counts[me])}};
  // In place: the local reduce-scatter writes this rank's part where it lies in the buffer, and
  // the allgather collects every part into its place.
  local_->reducescatter(
      whole, stageOp, [&](const std::vector<int64_t>&) { return part.data; }, stream);
  // With the local backend's own checks (NCCL's errors, its abort on a hang) before the cross
  // stage copies the part to the host.
  local_->synchronize(stream, crossComm_->deadline(),
                      "hierarchical allreduce: reduce-scatter within the host");
  AllreduceOptions crossOptions = options;
  crossOptions.prescale = crossOptions.postscale = 1.0;
  cross_.allreduce(part, part, stageOp, crossOptions, stream);
  if (parts.counts[me] > 0) {
    if (op == ReduceOp::Average && worldSize_ > 1)
      divideOnDevice(part.data, parts.counts[me], input.dtype, worldSize_, stream);
    if (options.postscale != 1.0)
      scaleOnDevice(part.data, parts.counts[me], input.dtype, options.postscale, stream);
  }
  local_->allgather(
      part, [&](const std::vector<int64_t>&) { return output.data; }, stream);
}

void HierarchicalCollectives::broadcast(const Tensor& tensor, int root, cudaStream_t stream) {
  flat_->broadcast(tensor, root, stream);
}

Tensor HierarchicalCollectives::allgather(const Tensor& input, const Allocate& allocate,
                                          cudaStream_t stream) {
  return flat_->allgather(input, allocate, stream);
}

AlltoallResult HierarchicalCollectives::alltoall(const Tensor& input,
                                                 const std::vector<int64_t>& splits,
                                                 const Allocate& allocate, cudaStream_t stream) {
  return flat_->alltoall(input, splits, allocate, stream);
}

Tensor HierarchicalCollectives::reducescatter(const Tensor& input, ReduceOp op,
                                              const Allocate& allocate, cudaStream_t stream) {
  return flat_->reducescatter(input, op, allocate, stream);
}

void HierarchicalCollectives::synchronize(cudaStream_t stream, Deadline deadline,
                                          const std::string& what) {
  // One stream carries both backends' kernels: a wait that ends in an error leaves the other
  // backend's running, so both are stopped.
  try {
    local_->synchronize(stream, deadline, what);
    flat_->synchronize(stream, deadline, what);
  } catch (...) {
    abandon();
    throw;
  }
}

void HierarchicalCollectives::abandon() {
  local_->abandon();
  flat_->abandon();
}

}  // namespace hvd::collectives::gpu
