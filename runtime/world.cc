#include "runtime/world.h"

#include <unistd.h>

#include <algorithm>

#include "collectives/rendezvous/prefix_store.h"
#include "collectives/rendezvous/rank_table.h"
#include "collectives/rendezvous/rendezvous_server.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "collectives/transport/wait_policy.h"
#include "common/logging.h"
#include "runtime/config_fields.h"
#include "runtime/cpu_binding.h"
#include "runtime/host_hierarchy.h"
#include "runtime/job_rendezvous.h"
#include "runtime/kernel_sharing.h"
#include "runtime/link_waits.h"
#include "runtime/rank_process.h"
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

// The ranks that take turns on this rank's CPUs: its host's, or, in a job across hosts whose
// host names share this kernel (pods of one node, network namespaces), the kernel's where they
// outnumber its CPUs (the kernel's online CPUs: each rank's mask may be its pod's alone).
// Counted for collectives called directly only: the engine's links wait alike either way.
CpuSharing cpuSharing(const Config& config, rendezvous::Store& store, int64_t epoch,
                      const CpuShareFacts& cpus, bool ownProcess, WorldUse use) {
  const Topology& t = config.topology;
  CpuSharing sharing{t.localSize, cpusOfLocalRanks(cpus)};
  if (!ownProcess || use == WorldUse::Engine || t.localSize >= t.size) return sharing;
  int onKernel =
      ranksOnKernel(store, detail::concat("job/", config.jobId, "/epoch/", epoch, "/kernel/"),
                    kernelId(), t.rank, t.size, t.localSize, config.startTimeout);
  if (onKernel > t.localSize && cpus.onlineCpus > 0 && onKernel > cpus.onlineCpus)
    sharing = {onKernel, cpus.onlineCpus, true};
  return sharing;
}

// `client`: an elastic round of one worker keeps reading hvdrun's store through it.
World singleRankWorld(const Config& config, World world, WorldUse use, const CpuShareFacts& cpus,
                      std::unique_ptr<rendezvous::TcpStoreClient> client) {
  world.ownedStore = std::move(client);
  world.data = singleRank(config);
  if (use == WorldUse::Engine) world.control = singleRank(config);
  world.cpuShare = cpuShare(cpus);
  return world;
}

// A world within one host: the model of rank 0's host calibration, or the configured one.
// Rank 0 reads the file and hands its text (or its error) to the others through the store, so
// every rank picks the same algorithms even while calibrate rewrites the file, and an elastic
// worker started before the file existed agrees with one started after.
collectives::NetworkModel hostModel(const Config& config, rendezvous::Store& store, int64_t epoch) {
  const Topology& t = config.topology;
  if (t.size == 1)
    return config.hostCalibrationPath.empty() ? *config.networkModel
                                              : loadHostCalibration(config.hostCalibrationPath);
  std::string mine = "none";
  if (t.rank == 0 && !config.hostCalibrationPath.empty()) {
    try {
      mine = "model:" + loadHostCalibration(config.hostCalibrationPath).toJson();
    } catch (const InvalidArgument& e) {
      mine = std::string("error:") + e.what();
    }
  }
  rendezvous::Bytes value = rendezvous::shareRankZeroValue(
      store, detail::concat("job/", config.jobId, "/epoch/", epoch, "/host-model/"), t.rank,
      rendezvous::Bytes(mine.begin(), mine.end()), config.startTimeout);
  std::string text(value.begin(), value.end());
  if (text.rfind("error:", 0) == 0)
    throw InvalidArgument("rank 0: " + text.substr(std::string("error:").size()));
  if (text.rfind("model:", 0) == 0)
    return collectives::NetworkModel::fromJson(text.substr(std::string("model:").size()),
                                               "rank 0's host calibration");
  return *config.networkModel;
}

// Whether auto picks the job's allreduce algorithm from a measured table (hvd-bench calibrate):
// a user who calibrated learns whether this job's layout is the one measured.
void logMeasuredTable(const collectives::NetworkModel& model, const std::string& link, int ranks,
                      int ranksPerHost, log::Logs& logs) {
  auto layout = [](const std::string& l, int n, int perHost) {
    return detail::concat(l, " on ", n, " ranks, ", std::min(perHost, n), " per host");
  };
  if (model.measured(link, ranks, ranksPerHost)) {
    logs.get("runtime")->info(
        "allreduce: auto picks from the times hvd-bench calibrate measured over {}",
        layout(link, ranks, ranksPerHost));
  } else if (!model.measuredAllreduce.empty()) {
    std::string tables;
    for (const auto& m : model.measuredAllreduce)
      tables += (tables.empty() ? "" : "; ") + layout(m.link, m.ranks, m.ranksPerHost);
    logs.get("runtime")->info(
        "allreduce: the model's measured tables ({}) are for other layouts than this job's ({}): "
        "auto picks by the cost model",
        tables, layout(link, ranks, ranksPerHost));
  }
}

// The host layout every rank agreed on (with the links within and across hosts where the job
// spans several) and the allreduce cost model over it. The cost model's ranks per host come
// from that layout, not from the local counts the launcher gave, which may differ between
// ranks (e.g. after an elastic job resized).
void attachHosts(const Config& config, World& world, rendezvous::Store& store, int64_t epoch,
                 const collectives::WaitPolicy& waits) {
  const Topology& t = config.topology;
  HostShape hosts{t.size, 0, std::vector<std::string>(t.size, t.hostname)};
  if (t.localSize < t.size)
    hosts = attachHostHierarchy(config, *world.data, store,
                                detail::concat("job/", config.jobId, "/epoch/", epoch), waits,
                                world.logs);
  // Within one host, this host's calibration, as rank 0 read it; across hosts the model every
  // rank agreed on (HVD_NETWORK_MODEL), whose tables measured across hosts serve communicators
  // of the layout they were measured on (NetworkModel::measured). Its tables within a host go:
  // a communicator of this job within one host (a process set) would take one, but its links
  // are this job's, TCP across hosts' loopback where the table may be shared memory's. Hosts
  // with different numbers of ranks have no layout a table could match: HostShape then says 1
  // per host, which a table of one rank per host must not take.
  bool oneHost = hosts.ranksPerHost >= t.size;
  auto model = std::make_shared<collectives::NetworkModel>(oneHost ? hostModel(config, store, epoch)
                                                                   : *config.networkModel);
  model->ranksPerHost = hosts.ranksPerHost;
  *model = model->sharingCores(hosts.coresPerHost);
  if (!oneHost)
    std::erase_if(model->measuredAllreduce, [&](const collectives::MeasuredAllreduce& m) {
      return m.withinOneHost() || !hosts.even;
    });
  if (t.rank == 0 && hosts.coresPerHost > 0 && hosts.coresPerHost < hosts.ranksPerHost)
    world.logs->get("runtime")->info(
        "allreduce cost model: {} ranks per host share {} cores, so each copies within its host "
        "and reduces at {}/{} of the model's rates",
        hosts.ranksPerHost, hosts.coresPerHost, hosts.coresPerHost, hosts.ranksPerHost);
  if (t.rank == 0)
    logMeasuredTable(*model, world.data->linkName(), t.size, hosts.ranksPerHost, *world.logs);
  world.networkModel = std::move(model);
  world.hostOfRank = std::move(hosts.hostOfRank);
}

}  // namespace

World::World() = default;
World::~World() = default;
World::World(World&&) noexcept = default;
World& World::operator=(World&&) noexcept = default;

log::LogSettings logSettings(const Config& config) {
  const Topology& t = config.topology;
  return {config.logLevel, config.logSubsystems,
          detail::concat(t.hostname, ":", getpid(), " [rank ", t.rank, "/", t.size, "]"),
          config.logHideTime};
}

World connectWorld(const Config& given, rendezvous::Store* store, WorldUse use,
                   const StoreWrapper& wrap, std::unique_ptr<rendezvous::TcpStoreClient> client,
                   std::shared_ptr<log::Logs> logs) {
  Config config = given;  // joinRendezvous may fill in the secret
  World world;
  world.logs = logs ? std::move(logs) : std::make_shared<log::Logs>();
  world.logs->configure(logSettings(config));
  const bool ownProcess = !store;  // one process per rank, not ranks as threads of a test
  CpuShareFacts cpus = prepareRankProcess(config, ownProcess, *world.logs);
  if (config.topology.size == 1)
    return singleRankWorld(config, std::move(world), use, cpus, std::move(client));
  RendezvousJoin joined = joinRendezvous(config, world, store, std::move(client));
  if (ownProcess) world.cpuShare = cpuShare(cpus);
  store = joined.store;
  if (wrap) {
    world.wrappedStore = wrap(*store);
    store = world.wrappedStore.get();
  }
  // Every init of this rank in the job gets a new epoch, so a process that shuts down and
  // initialises again never reads the addresses its previous communicators published. Init
  // and shutdown are collective, so all ranks count the same.
  int64_t epoch =
      store->add(detail::concat("job/", config.jobId, "/inits/", config.topology.rank), 1) - 1;
  if (use == WorldUse::Engine) world.blockedCallers = std::make_shared<std::atomic<int>>(0);
  LinkSetup setup{
      .waits = dataLinkWaits(config, cpuSharing(config, *store, epoch, cpus, ownProcess, use),
                             world.blockedCallers, world.logs),
      .bindAddress = joined.bindAddress,
      .logs = world.logs};
  TransportChooser transports;
  world.data = connectScope(config, *store, setup, epoch, "global", transports);
  attachHosts(config, world, *store, epoch, setup.waits);
  // The engine loop does its own polling of the control links (Engine::loop).
  if (use == WorldUse::Engine) {
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
