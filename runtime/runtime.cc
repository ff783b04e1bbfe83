#include "runtime/runtime.h"

#include <unistd.h>

#include "collectives/algorithms/barrier.h"
#include "collectives/rendezvous/prefix_store.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "collectives/transport/tcp/tcp_device.h"
#include "common/logging.h"

namespace hvd::runtime {

using namespace hvd::collectives;

Runtime::Runtime(Config config, std::unique_ptr<rendezvous::Store> ownedStore)
    : config_(std::move(config)), ownedStore_(std::move(ownedStore)) {}

Runtime::~Runtime() { comm_.reset(); }

std::unique_ptr<Runtime> Runtime::create(const Config& config) {
  const Topology& t = config.topology;
  log::configure({config.logLevel, config.logSubsystems,
                  detail::concat(t.hostname, ":", getpid(), " [rank ", t.rank, "/", t.size, "]")});
  if (t.size == 1) {
    std::unique_ptr<Runtime> rt(new Runtime(config, nullptr));
    rt->comm_ = std::make_unique<Comm>(0, 1, std::vector<std::shared_ptr<Connection>>(1),
                                       config.opTimeout, nullptr);
    return rt;
  }
  auto client = std::make_unique<rendezvous::TcpStoreClient>(
      config.rendezvousAddr, config.rendezvousPort, config.secret, config.startTimeout);
  // The address this worker reached the launcher from is one its peers can reach it on too.
  std::string bindAddress = client->localAddress();
  auto* store = client.get();
  std::unique_ptr<Runtime> rt(new Runtime(config, std::move(client)));
  rt->connect(*store, bindAddress);
  return rt;
}

std::unique_ptr<Runtime> Runtime::create(const Config& config, rendezvous::Store& store) {
  std::unique_ptr<Runtime> rt(new Runtime(config, nullptr));
  rt->connect(store, "127.0.0.1");
  return rt;
}

void Runtime::connect(rendezvous::Store& store, const std::string& bindAddress) {
  rendezvous::PrefixStore scoped("job/" + config_.jobId + "/epoch/0/global", store);
  auto device = tcp::TcpDevice::create(bindAddress, config_.secret, config_.socketBufferBytes);
  comm_ = device->connectAll(config_.topology.rank, config_.topology.size, scoped,
                             config_.startTimeout, config_.opTimeout);
  log::logger("runtime")->info("initialised: tcp on {}", device->listenAddress());
}

void Runtime::allreduce(const Tensor& input, const Tensor& output, ReduceOp op, double prescale,
                        double postscale) {
  AllreduceOptions options{config_.segmentBytes, config_.ringThresholdBytes, prescale, postscale};
  collectives::allreduce(*comm_, input, output, op, options);
}

void Runtime::broadcast(const Tensor& tensor, int root) {
  BroadcastOptions options;
  options.maxSegmentBytes = config_.segmentBytes;
  collectives::broadcast(*comm_, tensor, root, options);
}

Tensor Runtime::allgather(const Tensor& input, const Allocate& allocate) {
  return collectives::allgather(*comm_, input, allocate);
}

AlltoallResult Runtime::alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                                 const Allocate& allocate) {
  return collectives::alltoall(*comm_, input, splits, allocate);
}

Tensor Runtime::reducescatter(const Tensor& input, ReduceOp op, const Allocate& allocate) {
  return collectives::reducescatter(*comm_, input, op, allocate);
}

void Runtime::barrier() { collectives::barrier(*comm_); }

}  // namespace hvd::runtime
