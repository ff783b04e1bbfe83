#include "runtime/job_rendezvous.h"

#include "collectives/rendezvous/rendezvous_server.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "common/auth.h"
#include "common/error.h"
#include "common/network.h"

namespace hvd::runtime {
namespace {

// Where rank 0 of a job that srun or mpirun started serves: the address of this host that
// HVD_RENDEZVOUS_ADDR names.
std::string rankZeroBindAddress(const Config& config) {
  std::string bindAddress;
  for (const auto& address : net::resolve(config.rendezvousAddr))
    if (net::isThisMachine(address) && (bindAddress.empty() || net::isLoopback(bindAddress)))
      bindAddress = address;
  if (bindAddress.empty())
    throw InvalidArgument(detail::concat(
        config.externalLauncher, ": rank 0 serves the rendezvous, but HVD_RENDEZVOUS_ADDR=",
        config.rendezvousAddr, " is not an address of its host ", config.topology.hostname,
        " (set it to the host of rank 0, e.g. the first node of the allocation)"));
  // A node's own name often resolves to loopback there (Debian's "127.0.1.1 node1" line) and to
  // its network address elsewhere; rank 0 would then listen where no other node reaches it.
  if (net::isLoopback(bindAddress) && config.topology.crossSize > 1)
    throw InvalidArgument(detail::concat(
        config.externalLauncher, ": rank 0 serves the rendezvous at HVD_RENDEZVOUS_ADDR=",
        config.rendezvousAddr, ", which is loopback ", bindAddress, " on its host ",
        config.topology.hostname, ", but the job spans ", config.topology.crossSize,
        " nodes (export HVD_RENDEZVOUS_ADDR as an address the other nodes reach, e.g. "
        "$(hostname -I | cut -d' ' -f1) on the first node)"));
  return bindAddress;
}

// Rank 0 of a job that srun or mpirun started serves the rendezvous; its World owns the server.
std::unique_ptr<rendezvous::RendezvousServer> serveRendezvous(
    const Config& config, const std::shared_ptr<log::Logs>& logs) {
  std::string bindAddress = rankZeroBindAddress(config);
  std::unique_ptr<rendezvous::RendezvousServer> server;
  try {
    server = std::make_unique<rendezvous::RendezvousServer>(
        bindAddress, config.secret, config.rendezvousPort, config.handshakeTimeout, logs);
  } catch (const std::exception& e) {
    throw InvalidArgument(detail::concat(
        config.externalLauncher, ": rank 0 on host ", config.topology.hostname,
        " cannot serve the rendezvous at ", bindAddress, ":", config.rendezvousPort, ": ", e.what(),
        " (another job on this host may use the port; export HVD_RENDEZVOUS_PORT)"));
  }
  logs->get("runtime")->info("serving the rendezvous at {}:{} for {}", bindAddress,
                             config.rendezvousPort, config.externalLauncher);
  return server;
}

// srun ranks without HVD_SECRET (Config::secretFromMunge): rank 0 makes the secret and serves
// it for as long as the server returned lives, the others fetch it; `config.secret` holds it
// after.
std::unique_ptr<MungeSecretServer> agreeOnMungeSecret(Config& config,
                                                      const std::shared_ptr<log::Logs>& logs) {
  const Topology& t = config.topology;
  const int port = config.rendezvousPort + 1;
  if (port > 65535)
    throw InvalidArgument(detail::concat("HVD_RENDEZVOUS_PORT=", config.rendezvousPort,
                                         ": the job secret is served on the next port, 65536"));
  if (t.rank == 0) {
    config.secret = auth::randomHex(32);
    std::string at = rankZeroBindAddress(config);
    std::unique_ptr<MungeSecretServer> server;
    try {
      server = std::make_unique<MungeSecretServer>(at, static_cast<uint16_t>(port), config.jobId,
                                                   config.secret, logs);
    } catch (const std::exception& e) {
      bool munge = std::string(e.what()).rfind("munge", 0) == 0;
      throw InvalidArgument(detail::concat(
          config.externalLauncher, ": rank 0 on host ", t.hostname, ": ", e.what(),
          munge ? " (srun ranks without HVD_SECRET get it through munge: is munged running on "
                  "its default socket? Or export HVD_SECRET)"
                : " (another job on this host may use the port; export HVD_RENDEZVOUS_PORT, or "
                  "HVD_SECRET to need no second port)"));
    }
    logs->get("runtime")->info(
        "handing the job secret to the other ranks in munge credentials at {}:{}", at, port);
    return server;
  }
  try {
    config.secret = fetchMungeSecret(config.rendezvousAddr, static_cast<uint16_t>(port),
                                     config.jobId, config.startTimeout);
  } catch (const std::exception& e) {
    throw IoError(
        detail::concat("rank ", t.rank, " on host ", t.hostname,
                       ": cannot get the job secret (no HVD_SECRET was exported): ", e.what()));
  }
  return nullptr;
}

// Where this rank listens for its peers: the address it reached the rendezvous from, which its
// peers can reach too, unless --network-interface (HVD_NETWORK_INTERFACE) names one.
std::string peerBindAddress(const Config& config, const rendezvous::TcpStoreClient& client) {
  if (!config.networkInterface.empty())
    return net::addressOfInterface(config.networkInterface, config.topology.hostname);
  if (!config.peerAddress.empty() && net::isLoopback(client.localAddress()))
    return config.peerAddress;
  return client.localAddress();
}

}  // namespace

RendezvousJoin joinRendezvous(Config& config, World& world, rendezvous::Store* store,
                              std::unique_ptr<rendezvous::TcpStoreClient> client) {
  RendezvousJoin join;
  rendezvous::TcpStoreClient* launcher = client.get();
  world.ownedStore = std::move(client);
  if (store) {
    join.store = store;
    join.bindAddress = "127.0.0.1";
    return join;
  }
  if (config.secretFromMunge) join.secretServer = agreeOnMungeSecret(config, world.logs);
  if (config.servesRendezvous()) world.rendezvousServer = serveRendezvous(config, world.logs);
  world.storeServedByRankZero = !config.externalLauncher.empty() && !config.servesRendezvous();
  if (!launcher) {
    auto opened = std::make_unique<rendezvous::TcpStoreClient>(
        config.rendezvousAddr, config.rendezvousPort, config.secret, config.startTimeout);
    launcher = opened.get();
    world.ownedStore = std::move(opened);
  }
  join.store = launcher;
  join.bindAddress = peerBindAddress(config, *launcher);
  return join;
}

}  // namespace hvd::runtime
