// The collectives as blocking calls on tensors. Two implementations: Runtime (through the
// engine: negotiated, fused, any thread) and DirectCollectives (straight on a communicator, for
// benchmarking the algorithms themselves, as nccl-tests calls NCCL directly).
#pragma once

#include "collectives/operations.h"
#include "common/topology.h"

namespace hvd::runtime {

class BlockingCollectives {
 public:
  virtual ~BlockingCollectives() = default;
  virtual const Topology& topology() const = 0;
  // `output` may be `input` (in place).
  virtual void allreduce(const collectives::Tensor& input, const collectives::Tensor& output,
                         collectives::ReduceOp op, double prescale = 1.0,
                         double postscale = 1.0) = 0;
  virtual void broadcast(const collectives::Tensor& tensor, int root) = 0;
  virtual collectives::Tensor allgather(const collectives::Tensor& input,
                                        const collectives::Allocate& allocate) = 0;
  virtual collectives::AlltoallResult alltoall(const collectives::Tensor& input,
                                               const std::vector<int64_t>& splits,
                                               const collectives::Allocate& allocate) = 0;
  virtual collectives::Tensor reducescatter(const collectives::Tensor& input,
                                            collectives::ReduceOp op,
                                            const collectives::Allocate& allocate) = 0;
  virtual void barrier() = 0;
};

}  // namespace hvd::runtime
