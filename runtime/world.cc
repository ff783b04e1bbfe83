#include "runtime/world.h"

#include <unistd.h>

#include <algorithm>

#include "collectives/rendezvous/prefix_store.h"
#include "collectives/rendezvous/rendezvous_server.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "collectives/transport/wait_policy.h"
#include "common/auth.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/open_files.h"
#include "runtime/cpu_binding.h"
#include "runtime/host_hierarchy.h"
#include "runtime/malloc_retention.h"
#include "runtime/munge_secret.h"
#include "runtime/transport_table.h"

namespace hvd::runtime {
namespace {

using collectives::Comm;

std::unique_ptr<Comm> singleRank(const Config& config) {
  return std::make_unique<Comm>(0, 1, std::vector<std::shared_ptr<collectives::Connection>>(1),
                                config.opTimeout, nullptr);
}

// One of this rank's communicators over the whole job, through the transport table: shared
// memory when every rank is on this host and HVD_TRANSPORT allows it, else TCP. `transports`
// remembers a fallback to TCP, so the next scope of this init does not try shared memory again.
std::unique_ptr<Comm> connectScope(const Config& config, rendezvous::Store& store, LinkSetup setup,
                                   int64_t epoch, const std::string& scope,
                                   TransportChooser& transports) {
  rendezvous::PrefixStore scoped(detail::concat("job/", config.jobId, "/epoch/", epoch, "/", scope),
                                 store);
  setup.store = &scoped;
  const Topology& t = config.topology;
  auto log = setup.logs->get("runtime");
  Linked linked = transports.connect(
      config, {.rank = t.rank, .size = t.size, .sameHost = t.localSize == t.size}, setup,
      [&](const std::string& reason, const TransportEntry& next) {
        // Every rank has the same reason (it names each rank's): rank 0 warns, the others
        // only log it.
        log->log(t.rank == 0 ? spdlog::level::warn : spdlog::level::info,
                 "{} (HVD_TRANSPORT=auto: using {})", reason, next.label);
      });
  log->info("{}: {}", scope, linked.description);
  return std::move(linked.comm);
}

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

// True when this process is now bound to its slice.
bool bindToLocalShare(const Topology& t, const std::shared_ptr<spdlog::logger>& logger) {
  try {
    std::vector<int> allowed = allowedCpus();
    std::vector<int> mine = cpuSliceFor(allowed, t.localRank, t.localSize);
    if (mine.empty()) {
      logger->debug("not binding to CPUs: {} local ranks share the {} CPUs {}", t.localSize,
                    allowed.size(), cpuListText(allowed));
      return false;
    }
    bindProcessTo(mine);
    logger->info("bound to CPUs {} (local rank {} of {}; HVD_BIND_TO=none turns this off)",
                 cpuListText(mine), t.localRank, t.localSize);
    return true;
  } catch (const Error& e) {
    logger->warn("running unbound: {}", e.what());
    return false;
  }
}

CpuShareFacts cpuFactsOf(const Config& config, bool boundByHvd) {
  CpuShareFacts facts{.localSize = config.topology.localSize,
                      .boundByHvd = boundByHvd,
                      .externalLauncher = !config.externalLauncher.empty()};
  try {
    facts.allowedCpus = static_cast<int>(allowedCpus().size());
  } catch (const Error&) {
    facts.allowedCpus = 0;
  }
  facts.onlineCpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return facts;
}

}  // namespace

World::World() = default;
World::~World() = default;
World::World(World&&) noexcept = default;
World& World::operator=(World&&) noexcept = default;

collectives::SpinPolicy directCollectiveSpins(const Config& config, int localSize, int hostCpus) {
  if (hostCpus <= 0 || localSize <= hostCpus)
    return {.smallSpin = config.directSpinTime, .largeSpin = config.directSpinTime};
  return {.smallSpin = std::min(config.spinTime, config.directSpinTime),
          .largeSpin = std::chrono::microseconds(0)};
}

log::LogSettings logSettings(const Config& config) {
  const Topology& t = config.topology;
  return {config.logLevel, config.logSubsystems,
          detail::concat(t.hostname, ":", getpid(), " [rank ", t.rank, "/", t.size, "]"),
          config.logHideTime};
}

// srun ranks without HVD_SECRET (Config::secretFromMunge): rank 0 makes the secret and serves
// it for as long as `server` lives, the others fetch it; `config.secret` holds it after.
void agreeOnMungeSecret(Config& config, std::unique_ptr<MungeSecretServer>& server,
                        const std::shared_ptr<log::Logs>& logs) {
  const Topology& t = config.topology;
  const int port = config.rendezvousPort + 1;
  if (port > 65535)
    throw InvalidArgument(detail::concat("HVD_RENDEZVOUS_PORT=", config.rendezvousPort,
                                         ": the job secret is served on the next port, 65536"));
  if (t.rank == 0) {
    config.secret = auth::randomHex(32);
    std::string at = rankZeroBindAddress(config);
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
        "handing the job secret to the other ranks in munge credentials "
        "at {}:{}",
        at, port);
    return;
  }
  try {
    config.secret = fetchMungeSecret(config.rendezvousAddr, static_cast<uint16_t>(port),
                                     config.jobId, config.startTimeout);
  } catch (const std::exception& e) {
    throw IoError(
        detail::concat("rank ", t.rank, " on host ", t.hostname,
                       ": cannot get the job secret (no HVD_SECRET was exported): ", e.what()));
  }
}

World connectWorld(const Config& given, rendezvous::Store* store, WorldUse use,
                   const StoreWrapper& wrap, std::unique_ptr<rendezvous::TcpStoreClient> client,
                   std::shared_ptr<log::Logs> logs) {
  bool withControl = use == WorldUse::Engine;
  Config config = given;
  const Topology& t = config.topology;
  World world;
  world.logs = logs ? std::move(logs) : std::make_shared<log::Logs>();
  world.logs->configure(logSettings(config));
  // Until every rank has joined, which it cannot before it has the secret.
  std::unique_ptr<MungeSecretServer> secretServer;
  if (config.secretFromMunge && !store && t.size > 1)
    agreeOnMungeSecret(config, secretServer, world.logs);
  retainFreedMemory(config.mallocRetainBytes, *world.logs->get("runtime"));
  rendezvous::TcpStoreClient* launcherClient = client.get();
  world.ownedStore = std::move(client);
  if (t.size == 1) {
    world.data = singleRank(config);
    if (withControl) world.control = singleRank(config);
    world.cpuShare = cpuShare(cpuFactsOf(config, false));
    return world;
  }
  std::string bindAddress = "127.0.0.1";
  if (!store && config.servesRendezvous)
    world.rendezvousServer = serveRendezvous(config, world.logs);
  world.storeServedByRankZero =
      !store && !config.externalLauncher.empty() && !config.servesRendezvous;
  // One process per rank (not ranks sharing a process in tests).
  const bool ownProcess = !store;
  bool bound = false;
  if (ownProcess) {
    // Bind before the engine's and the transport's threads start, so they inherit it.
    bound = config.externalLauncher.empty() && config.cpuBinding == CpuBinding::Core &&
            bindToLocalShare(t, world.logs->get("runtime"));
    // Before the links open: a large job's would run past the usual soft limit of 1,024.
    auto files =
        ensureOpenFiles(rankLinkFiles(t.rank, t.size) + kOpenFilesKept,
                        detail::concat("rank ", t.rank, "/", t.size, " on host ", t.hostname),
                        detail::concat("a job of ", t.size, " ranks (a socket to each peer",
                                       t.rank == 0 ? ", two on rank 0)" : ")"));
    if (files.raised())
      world.logs->get("runtime")->info(
          "raised the open-file limit (ulimit -n) from {} to {} for the links of {} ranks",
          files.before, files.after, t.size);
    if (!launcherClient) {
      auto opened = std::make_unique<rendezvous::TcpStoreClient>(
          config.rendezvousAddr, config.rendezvousPort, config.secret, config.startTimeout);
      launcherClient = opened.get();
      world.ownedStore = std::move(opened);
    }
    // The address this worker reached the launcher from is one its peers can reach it on too.
    if (!config.networkInterface.empty())
      bindAddress = net::addressOfInterface(config.networkInterface, t.hostname);
    else if (!config.peerAddress.empty() && net::isLoopback(launcherClient->localAddress()))
      bindAddress = config.peerAddress;
    else
      bindAddress = launcherClient->localAddress();
    store = launcherClient;
  }
  // This rank's CPUs after any binding: the compute threads that fit them, and whether the
  // host's ranks outnumber them (directCollectiveSpins).
  CpuShareFacts cpus = cpuFactsOf(config, bound);
  if (ownProcess) world.cpuShare = cpuShare(cpus);
  if (wrap) {
    world.wrappedStore = wrap(*store);
    store = world.wrappedStore.get();
  }
  // Every init of this rank in the job gets a new epoch, so a process that shuts down and
  // initialises again never reads the addresses its previous communicators published. Init
  // and shutdown are collective, so all ranks count the same.
  int64_t epoch = store->add(detail::concat("job/", config.jobId, "/inits/", t.rank), 1) - 1;
  // Only the engine's control links are woken by other threads (a submission); the data links
  // may sleep in a blocking receive, after polling for a while. A collective called directly
  // has a caller with nothing else to do, so it polls long, as MPI's blocking calls do: on a
  // VM whose idle vCPUs halt, a blocking receive's wake-up is slow and varies from day to day
  // (docs/performance.md). The engine's data links poll for small messages, and for large ones
  // only while a caller is blocked on a result: polling through a large transfer while the
  // training step runs would take CPU from it (the step shares the engine's core).
  collectives::WaitPolicy data{.mode = collectives::WaitMode::Blocking};
  if (withControl) {
    world.blockedCallers = std::make_shared<std::atomic<int>>(0);
    data.spins = {.smallSpin = config.spinTime, .blockedCallers = world.blockedCallers};
    // A transfer that stops moving inside a collective (a stopped or hung peer) is reported
    // like a stalled negotiation, naming the peer, and fails the job at the same limit.
    if (config.stallCheck)
      data.spins.stall = {
          .warnAfter = config.stallWarning, .failAfter = config.stallShutdown, .logs = world.logs};
  } else {
    int hostCpus = cpusOfLocalRanks(cpus);
    data.spins = directCollectiveSpins(config, t.localSize, hostCpus);
    if (t.rank == 0 && data.spins.largeSpin != config.directSpinTime)
      world.logs->get("runtime")->info(
          "{} ranks share {} CPU{} of this host: collectives poll only for messages of at "
          "most 64 KiB, for {} us (HVD_SPIN_MICROSECONDS), and sleep at once on larger ones",
          t.localSize, hostCpus, hostCpus == 1 ? "" : "s", data.spins.smallSpin.count());
  }
  // A peer seen stopped (shared memory knows its process) fails the transfer at the liveness
  // timeout, as the engine's heartbeats fail a silent peer; collectives called directly have
  // no heartbeats, and would wait for the op timeout.
  data.spins.stall.stoppedPeerAfter = config.livenessTimeout;
  data.spins.stall.logs = world.logs;
  TransportChooser transports;
  LinkSetup setup{.waits = data, .bindAddress = bindAddress, .logs = world.logs};
  world.data = connectScope(config, *store, setup, epoch, "global", transports);
  // The cost model's ranks per host come from the layout every rank agreed on (the local
  // counts the launcher gave may differ between ranks, e.g. after an elastic job resized).
  HostShape hosts{t.size, 0, std::vector<std::string>(t.size, t.hostname)};
  if (t.localSize < t.size)
    hosts = attachHostHierarchy(config, *world.data, *store,
                                detail::concat("job/", config.jobId, "/epoch/", epoch), data,
                                world.logs);
  auto model = std::make_shared<collectives::NetworkModel>(*config.networkModel);
  model->ranksPerHost = hosts.ranksPerHost;
  *model = model->sharingCores(hosts.coresPerHost);
  if (t.rank == 0 && hosts.coresPerHost > 0 && hosts.coresPerHost < hosts.ranksPerHost)
    world.logs->get("runtime")->info(
        "allreduce cost model: {} ranks per host share {} cores, so each copies within its host "
        "and reduces at {}/{} of the model's rates",
        hosts.ranksPerHost, hosts.coresPerHost, hosts.coresPerHost, hosts.ranksPerHost);
  world.networkModel = std::move(model);
  world.hostOfRank = std::move(hosts.hostOfRank);
  // The engine loop does its own polling of the control links (Engine::loop).
  if (withControl) {
    setup.waits = {.mode = collectives::WaitMode::Interruptible};
    setup.traffic = Traffic::Control;
    setup.shape = collectives::LinkShape::StarAroundRankZero;
    world.control = connectScope(config, *store, setup, epoch, "control", transports);
  }
  return world;
}

void leaveRendezvous(World& world, std::chrono::milliseconds timeout) {
  if (world.rendezvousServer) {
    world.rendezvousServer.reset();
    return;
  }
  auto* client = dynamic_cast<rendezvous::TcpStoreClient*>(world.ownedStore.get());
  if (!world.storeServedByRankZero || !client) return;
  if (!client->waitUntilClosed(timeout))
    world.logs->get("runtime")->warn(
        "shutdown: rank 0's rendezvous server was still open after {} s; a new init may "
        "reach it before it closes",
        std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
}

}  // namespace hvd::runtime
