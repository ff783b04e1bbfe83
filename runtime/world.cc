#include "runtime/world.h"

#include <unistd.h>

#include "collectives/rendezvous/prefix_store.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "collectives/transport/tcp/tcp_device.h"
#include "common/logging.h"

namespace hvd::runtime {
namespace {

using collectives::Comm;

std::unique_ptr<Comm> singleRank(const Config& config) {
  return std::make_unique<Comm>(0, 1, std::vector<std::shared_ptr<collectives::Connection>>(1),
                                config.opTimeout, nullptr);
}

std::unique_ptr<Comm> connectScope(const Config& config, rendezvous::Store& store,
                                   const std::string& bindAddress, const std::string& scope) {
  rendezvous::PrefixStore scoped("job/" + config.jobId + "/epoch/0/" + scope, store);
  auto device = collectives::tcp::TcpDevice::create(bindAddress, config.secret,
                                                    config.socketBufferBytes);
  auto comm = device->connectAll(config.topology.rank, config.topology.size, scoped,
                                 config.startTimeout, config.opTimeout);
  log::logger("runtime")->info("{}: tcp on {}", scope, device->listenAddress());
  return comm;
}

}  // namespace

World connectWorld(const Config& config, rendezvous::Store* store, bool withControl) {
  const Topology& t = config.topology;
  log::configure({config.logLevel, config.logSubsystems,
                  detail::concat(t.hostname, ":", getpid(), " [rank ", t.rank, "/", t.size, "]")});
  World world;
  if (t.size == 1) {
    world.data = singleRank(config);
    if (withControl) world.control = singleRank(config);
    return world;
  }
  std::string bindAddress = "127.0.0.1";
  if (!store) {
    auto client = std::make_unique<rendezvous::TcpStoreClient>(
        config.rendezvousAddr, config.rendezvousPort, config.secret, config.startTimeout);
    // The address this worker reached the launcher from is one its peers can reach it on too.
    bindAddress = client->localAddress();
    store = client.get();
    world.ownedStore = std::move(client);
  }
  world.data = connectScope(config, *store, bindAddress, "global");
  if (withControl) world.control = connectScope(config, *store, bindAddress, "control");
  return world;
}

}  // namespace hvd::runtime
