// The collectives straight on the data communicator, without the engine: the caller's thread
// runs them, every rank must call the same ones in the same order, one thread at a time. This
// is what hvd-bench's sweep measures (the algorithms and the transport alone).
#pragma once

#include <memory>

#include "runtime/blocking_collectives.h"
#include "runtime/world.h"

namespace hvd::runtime {

class DirectCollectives : public BlockingCollectives {
 public:
  static std::unique_ptr<DirectCollectives> create(const Config& config,
                                                   rendezvous::Store* store = nullptr);

  const Topology& topology() const override { return config_.topology; }
  void allreduce(const collectives::Tensor& input, const collectives::Tensor& output,
                 collectives::ReduceOp op, double prescale = 1.0, double postscale = 1.0) override;
  void broadcast(const collectives::Tensor& tensor, int root) override;
  collectives::Tensor allgather(const collectives::Tensor& input,
                                const collectives::Allocate& allocate) override;
  collectives::AlltoallResult alltoall(const collectives::Tensor& input,
                                       const std::vector<int64_t>& splits,
                                       const collectives::Allocate& allocate) override;
  collectives::Tensor reducescatter(const collectives::Tensor& input, collectives::ReduceOp op,
                                    const collectives::Allocate& allocate) override;
  void barrier() override;
  // The data communicator's link kind (Comm::linkName).
  const std::string& linkName() const;

 private:
  DirectCollectives(Config config, World world)
      : config_(std::move(config)), world_(std::move(world)) {}
  Config config_;
  World world_;
};

}  // namespace hvd::runtime
