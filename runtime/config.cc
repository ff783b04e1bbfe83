#include "runtime/config.h"

#include <unistd.h>

#include <filesystem>
#include <map>

#include "common/error.h"
#include "runtime/config_fields.h"
#include "runtime/external_launch.h"
#include "runtime/munge_secret.h"

namespace hvd::runtime {
namespace {

std::string localHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

void checkBelow(const std::string& what, int value, const std::string& limitName, int limit) {
  if (value >= limit)
    throw InvalidArgument(
        detail::concat(what, "=", value, " must be below ", limitName, "=", limit));
}

}  // namespace

const char* transportName(Transport t) {
  switch (t) {
    case Transport::Tcp:
      return "tcp";
    case Transport::Shm:
      return "shm";
    case Transport::Auto:
      break;
  }
  return "auto";
}

namespace {

using params::envName;
using params::ParamId;

void checkPlacement(const Topology& t) {
  checkBelow(envName(ParamId::Rank), t.rank, envName(ParamId::Size), t.size);
  checkBelow(envName(ParamId::LocalRank), t.localRank, envName(ParamId::LocalSize), t.localSize);
  checkBelow(envName(ParamId::CrossRank), t.crossRank, envName(ParamId::CrossSize), t.crossSize);
}

// A job of several ranks needs the launcher's rendezvous and secret.
void checkLauncherSettings(const Config& c) {
  if (c.topology.size <= 1) return;
  if (c.rendezvousAddr.empty())
    throw InvalidArgument(detail::concat(envName(ParamId::Size), "=", c.topology.size, " but ",
                                         envName(ParamId::RendezvousAddr),
                                         " is not set: start multi-rank jobs with hvdrun"));
  if (c.rendezvousPort == 0)
    throw InvalidArgument(envName(ParamId::RendezvousPort) + " is not set (" +
                          envName(ParamId::RendezvousAddr) + "=" + c.rendezvousAddr + ")");
  if (c.secret.empty() && !c.secretFromMunge)
    throw InvalidArgument(envName(ParamId::Secret) +
                          " is not set: workers must be started by hvdrun, which hands each "
                          "worker the job secret");
}

// Values each variable allows alone but the runtime cannot use.
void checkSizes(const Config& c) {
  const std::size_t segment = c.engine.executor.segmentBytes;
  if (segment != 0 && segment < 1024)
    throw InvalidArgument(detail::concat(envName(ParamId::SegmentBytes), "=", segment,
                                         ": expected 0 (the transport's) or at least 1024"));
  if (c.shmBufferBytes % 64 != 0)
    throw InvalidArgument(detail::concat(envName(ParamId::ShmBufferBytes), "=", c.shmBufferBytes,
                                         " is not a multiple of 64"));
}

void checkStallTimes(const CoordinatorOptions& c) {
  if (c.stallShutdown.count() > 0 && c.stallShutdown < c.stallWarning)
    throw InvalidArgument(detail::concat(
        envName(ParamId::StallShutdownTimeSeconds), "=", c.stallShutdown.count(),
        " is shorter than ", envName(ParamId::StallCheckTimeSeconds), "=", c.stallWarning.count(),
        ": the job would fail before the stall is reported"));
}

// The engine's options that no row fills: copies of Config-wide values and what follows from
// the placement and from which knobs were set.
void deriveEngineOptions(Config& c, const params::ParamValues& v) {
  EngineOptions& e = c.engine;
  e.opTimeout = c.opTimeout;
  e.executor.opTimeout = c.opTimeout;
  e.executor.gpuHierarchicalAllreduce = c.hierarchicalAllreduce;
  c.setTopology(c.topology);
  e.autotune.tuneFusion = !v.isSet(ParamId::FusionThreshold);
  e.autotune.tuneCycleTime = !v.isSet(ParamId::CycleTime);
}

}  // namespace

Config Config::fromParams(const params::ParamValues& v, bool secretFromMunge) {
  Config c;
  fillFromTable(c, v);
  c.secretFromMunge = secretFromMunge;
  if (c.topology.hostname.empty()) c.topology.hostname = localHostname();
  checkPlacement(c.topology);
  checkLauncherSettings(c);
  checkSizes(c);
  params::checkCombinations(v);
  checkStallTimes(c.engine.coordinator);
  deriveEngineOptions(c, v);
  if (v.getString(ParamId::NetworkModel).empty()) {
    std::string saved = machineNetworkModelPath();
    std::error_code error;
    if (!saved.empty() && std::filesystem::exists(saved, error)) c.hostCalibrationPath = saved;
  }
  if (c.elastic && (c.workerId < 0 || c.rendezvousAddr.empty()))
    throw InvalidArgument(envName(ParamId::Elastic) + "=1 needs " + envName(ParamId::WorkerId) +
                          " and " + envName(ParamId::RendezvousAddr) +
                          ": elastic workers are started by hvdrun");
  return c;
}

void Config::setTopology(Topology placement) {
  topology = std::move(placement);
  // Every rank of a round decides alike: the executor cuts fused allreduces by this.
  engine.executor.fuseInPieces = topology.localSize == topology.size;
  engine.executor.hostname = topology.hostname;
}

EngineOptions defaultEngineOptions() {
  return Config::fromParams(params::ParamValues::fromMap({})).engine;
}

namespace {

Config fromSnapshot(std::map<std::string, std::string> env) {
  auto external = detectExternalLaunch(env);
  // hvdrun's ranks, or ranks that hvd.spark.run or hvd.ray placed (HVD_EXTERNAL_LAUNCHER).
  if (!external) return Config::fromParams(params::ParamValues::fromMap(env));
  // What the job script exports wins, under hvd's or Horovod's name.
  for (const auto& [k, v] : external->params) {
    const std::string& alias = params::spec(k).horovodAlias;
    if (alias.empty() || !env.count(alias)) env.insert({k, v});
  }
  // Read through the registry, so Horovod's names (HOROVOD_GLOO_RENDEZVOUS_ADDR, ...) count.
  auto values = params::ParamValues::fromMap(env);
  int64_t size = values.getInt(ParamId::Size);
  bool secretFromMunge = false;
  if (size > 1) {
    const std::string how = " (the job script exports it to every rank; see docs/cluster.md)";
    if (values.getString(ParamId::RendezvousAddr).empty())
      throw InvalidArgument(detail::concat(external->launcher, " started ", size,
                                           " ranks without hvdrun, but ",
                                           envName(ParamId::RendezvousAddr),
                                           " (rank 0's host, where rank 0 serves the rendezvous) "
                                           "is not set",
                                           how));
    if (values.getInt(ParamId::RendezvousPort) == 0)
      throw InvalidArgument(external->launcher + ": " + envName(ParamId::RendezvousPort) +
                            " is not set" + how);
    const std::string& secret = envName(ParamId::Secret);
    if (values.getString(ParamId::Secret).empty()) {
      auto path = env.find("PATH");
      secretFromMunge = external->launcher == "Slurm" &&
                        mungeAvailable(path == env.end() ? std::string() : path->second);
      if (!secretFromMunge)
        throw InvalidArgument(
            external->launcher + ": " + secret +
            " is not set; the ranks need a shared secret, e.g. export " + secret +
            "=$(openssl rand -hex 32)" + how +
            (external->launcher == "Slurm"
                 ? " (with munge's programs installed, srun ranks get one from rank 0)"
                 : ""));
    }
  }
  Config c = Config::fromParams(values, secretFromMunge);
  if (c.elastic)
    throw InvalidArgument(external->launcher +
                          " started this rank with HVD_ELASTIC=1; elastic "
                          "jobs are started by hvdrun (--min-np, --host-discovery-script)");
  c.externalLauncher = external->launcher;
  return c;
}

}  // namespace

Config Config::fromEnvironment() {
  auto env = params::environmentSnapshot();
  auto omp = env.find("OMP_NUM_THREADS");
  bool threadsChosen = omp != env.end() && !omp->second.empty();
  Config c = fromSnapshot(std::move(env));
  c.computeThreadsChosen = threadsChosen;
  return c;
}

}  // namespace hvd::runtime
