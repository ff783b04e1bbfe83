// Hierarchical allreduce of GPU tensors, for clusters whose inter-host network NCCL uses poorly
// (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE): the reduction runs in three stages,
//   1. reduce-scatter among the ranks of one host (`local`, GPU to GPU): local rank i ends up
//      with part i of the host's sum;
//   2. allreduce of part i with the ranks of local index i on the other hosts (`cross`, through
//      host memory and the TCP algorithms);
//   3. allgather of the parts among the ranks of the host (`local`).
// Sum and Average (what gradients use) run in stages; Min, Max, Product and every other
// operation run on `flat`, the backend over the whole communicator.
//
// Each host must have as many ranks (the caller checks; a different layout runs flat). Average,
// prescale and postscale apply once, to the whole world's result, as the flat allreduce does;
// the order of the additions differs from the flat one, so floats may differ from it by
// rounding, but every rank gets the same bits.
// Thread model: one thread at a time; `local` and `cross` share the flat communicator's
// connections, so they run on the thread that runs everything else on it.
#pragma once

#include <memory>

#include "collectives/gpu/gpu_collectives.h"
#include "collectives/gpu/staged_collectives.h"

namespace hvd::collectives::gpu {

class HierarchicalCollectives : public GpuCollectives {
 public:
  // `localComm` and `crossComm` are the subsets `local` runs on and the cross stage uses;
  // `worldSize` divides averages.
  HierarchicalCollectives(std::unique_ptr<Comm> localComm, std::unique_ptr<Comm> crossComm,
                          std::unique_ptr<GpuCollectives> local,
                          std::unique_ptr<GpuCollectives> flat, int device, int worldSize);
  ~HierarchicalCollectives() override;
  const char* name() const override { return "hierarchical"; }

  void allreduce(const Tensor& input, const Tensor& output, ReduceOp op,
                 const AllreduceOptions& options, cudaStream_t stream) override;
  void broadcast(const Tensor& tensor, int root, cudaStream_t stream) override;
  Tensor allgather(const Tensor& input, const Allocate& allocate, cudaStream_t stream) override;
  AlltoallResult alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                          const Allocate& allocate, cudaStream_t stream) override;
  Tensor reducescatter(const Tensor& input, ReduceOp op, const Allocate& allocate,
                       cudaStream_t stream) override;
  // Waits with `local`'s checks (its failures abort it), then `flat`'s.
  void synchronize(cudaStream_t stream, Deadline deadline, const std::string& what) override;
  void abandon() override;

 private:
  // Declared first: the backends below refer to them.
  std::unique_ptr<Comm> localComm_;
  std::unique_ptr<Comm> crossComm_;
  std::unique_ptr<GpuCollectives> local_;
  std::unique_ptr<GpuCollectives> flat_;
  StagedCollectives cross_;
  int worldSize_;
};

}  // namespace hvd::collectives::gpu
