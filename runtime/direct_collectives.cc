#include "runtime/direct_collectives.h"

#include "collectives/algorithms/barrier.h"
#include "collectives/rendezvous/tcp_store_client.h"  // connectWorld's client argument

namespace hvd::runtime {

using namespace hvd::collectives;

std::unique_ptr<DirectCollectives> DirectCollectives::create(const Config& config,
                                                             rendezvous::Store* store) {
  World world = connectWorld(config, store, WorldUse::Direct);
  return std::unique_ptr<DirectCollectives>(new DirectCollectives(config, std::move(world)));
}

void DirectCollectives::allreduce(const Tensor& input, const Tensor& output, ReduceOp op,
                                  double prescale, double postscale) {
  AllreduceOptions options{config_.engine.executor.segmentBytes,
                           config_.engine.executor.ringThresholdBytes,
                           prescale,
                           postscale,
                           config_.engine.executor.allreduceAlgorithm,
                           world_.networkModel.get()};
  collectives::allreduce(*world_.data, input, output, op, options);
}

void DirectCollectives::broadcast(const Tensor& tensor, int root) {
  BroadcastOptions options;
  options.maxSegmentBytes = config_.engine.executor.segmentBytes;
  options.model = world_.networkModel.get();
  collectives::broadcast(*world_.data, tensor, root, options);
}

Tensor DirectCollectives::allgather(const Tensor& input, const Allocate& allocate) {
  return collectives::allgather(*world_.data, input, allocate);
}

AlltoallResult DirectCollectives::alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                                           const Allocate& allocate) {
  return collectives::alltoall(*world_.data, input, splits, allocate);
}

Tensor DirectCollectives::reducescatter(const Tensor& input, ReduceOp op,
                                        const Allocate& allocate) {
  return collectives::reducescatter(*world_.data, input, op, allocate);
}

void DirectCollectives::barrier() { collectives::barrier(*world_.data); }

const std::string& DirectCollectives::linkName() const { return world_.data->linkName(); }

}  // namespace hvd::runtime
