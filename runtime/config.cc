#include "runtime/config.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "common/error.h"
#include "runtime/external_launch.h"

namespace hvd::runtime {
namespace {

std::string localHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

void checkBelow(const char* what, int value, const char* limitName, int limit) {
  if (value >= limit)
    throw InvalidArgument(detail::concat(what, "=", value, " must be below ", limitName, "=",
                                         limit));
}

// HVD_CHECK_REPLICAS as Config::checkReplicasEvery.
int parseCheckReplicas(const std::string& text) {
  if (text == "off") return -1;
  if (text == "first") return 0;
  const std::string prefix = "every:";
  if (text.rfind(prefix, 0) == 0) {
    const std::string digits = text.substr(prefix.size());
    int every = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), every);
    if (ec == std::errc() && end == digits.data() + digits.size() && every > 0) return every;
  }
  throw InvalidArgument(detail::concat("HVD_CHECK_REPLICAS='", text,
                                       "': expected off, first or every:N with N >= 1"));
}

// "0,1;2,3" -> {{0,1},{2,3}}; each set sorted, without duplicates, within [0, size).
std::vector<std::vector<int32_t>> parseProcessSets(const std::string& text, int size) {
  std::vector<std::vector<int32_t>> sets;
  std::size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    auto end = text.find(';', start);
    std::string item = text.substr(start, end == std::string::npos ? end : end - start);
    std::vector<int32_t> ranks;
    std::size_t p = 0;
    while (p <= item.size()) {
      auto comma = item.find(',', p);
      std::string token = item.substr(p, comma == std::string::npos ? comma : comma - p);
      ranks.push_back(static_cast<int32_t>(
          params::parseInt(token, 0, size - 1, "HVD_PROCESS_SETS rank '" + token + "'")));
      if (comma == std::string::npos) break;
      p = comma + 1;
    }
    std::vector<int32_t> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw InvalidArgument("HVD_PROCESS_SETS: set '" + item + "' names a rank twice");
    sets.push_back(sorted);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return sets;
}

}  // namespace

const char* transportName(Transport t) {
  switch (t) {
    case Transport::Tcp: return "tcp";
    case Transport::Shm: return "shm";
    case Transport::Auto: break;
  }
  return "auto";
}

namespace {

std::shared_ptr<const collectives::NetworkModel> loadNetworkModel(const std::string& path) {
  collectives::NetworkModel model;
  if (!path.empty()) model = collectives::NetworkModel::fromFile(path, "HVD_NETWORK_MODEL=" + path);
  // Ranks per host are the job's, set once every rank agreed on the layout (connectWorld).
  return std::make_shared<const collectives::NetworkModel>(model);
}

}  // namespace

Config Config::fromParams(const params::ParamValues& v) {
  Config c;
  Topology& t = c.topology;
  t.rank = static_cast<int>(v.getInt("HVD_RANK"));
  t.size = static_cast<int>(v.getInt("HVD_SIZE"));
  t.localRank = static_cast<int>(v.getInt("HVD_LOCAL_RANK"));
  t.localSize = static_cast<int>(v.getInt("HVD_LOCAL_SIZE"));
  t.crossRank = static_cast<int>(v.getInt("HVD_CROSS_RANK"));
  t.crossSize = static_cast<int>(v.getInt("HVD_CROSS_SIZE"));
  t.hostname = v.getString("HVD_HOSTNAME");
  if (t.hostname.empty()) t.hostname = localHostname();
  checkBelow("HVD_RANK", t.rank, "HVD_SIZE", t.size);
  checkBelow("HVD_LOCAL_RANK", t.localRank, "HVD_LOCAL_SIZE", t.localSize);
  checkBelow("HVD_CROSS_RANK", t.crossRank, "HVD_CROSS_SIZE", t.crossSize);

  c.rendezvousAddr = v.getString("HVD_RENDEZVOUS_ADDR");
  c.rendezvousPort = static_cast<uint16_t>(v.getInt("HVD_RENDEZVOUS_PORT"));
  c.secret = v.getString("HVD_SECRET");
  c.jobId = v.getString("HVD_JOB_ID");
  if (t.size > 1) {
    if (c.rendezvousAddr.empty())
      throw InvalidArgument(detail::concat("HVD_SIZE=", t.size,
                                           " but HVD_RENDEZVOUS_ADDR is not set: start multi-rank "
                                           "jobs with hvdrun"));
    if (c.rendezvousPort == 0)
      throw InvalidArgument("HVD_RENDEZVOUS_PORT is not set (HVD_RENDEZVOUS_ADDR=" +
                            c.rendezvousAddr + ")");
    if (c.secret.empty())
      throw InvalidArgument("HVD_SECRET is not set: workers must be started by hvdrun, which "
                            "hands each worker the job secret");
  }
  c.startTimeout = std::chrono::seconds(v.getInt("HVD_START_TIMEOUT"));
  c.handshakeTimeout = std::chrono::seconds(v.getInt("HVD_HANDSHAKE_TIMEOUT_SECONDS"));
  c.opTimeout = std::chrono::seconds(v.getInt("HVD_OP_TIMEOUT"));
  c.ringThresholdBytes = static_cast<std::size_t>(v.getInt("HVD_ALLREDUCE_RING_THRESHOLD"));
  // The registry has already checked the name against its choices; the parse maps it.
  c.allreduceAlgorithm =
      collectives::parseAllreduceAlgorithm(v.getString("HVD_ALLREDUCE_ALGORITHM"));
  c.networkModel = loadNetworkModel(v.getString("HVD_NETWORK_MODEL"));
  c.segmentBytes = static_cast<std::size_t>(v.getInt("HVD_SEGMENT_BYTES"));
  if (c.segmentBytes != 0 && c.segmentBytes < 1024)
    throw InvalidArgument(detail::concat("HVD_SEGMENT_BYTES=", c.segmentBytes,
                                         ": expected 0 (the transport's) or at least 1024"));
  c.socketBufferBytes = static_cast<std::size_t>(v.getInt("HVD_SOCKET_BUFFER_BYTES"));
  std::string transport = v.getString("HVD_TRANSPORT");
  c.transport = transport == "tcp"   ? Transport::Tcp
                : transport == "shm" ? Transport::Shm
                                     : Transport::Auto;
  c.shmBufferBytes = static_cast<std::size_t>(v.getInt("HVD_SHM_BUFFER_BYTES"));
  if (c.shmBufferBytes % 64 != 0)
    throw InvalidArgument(detail::concat("HVD_SHM_BUFFER_BYTES=", c.shmBufferBytes,
                                         " is not a multiple of 64"));
  c.spinTime = std::chrono::microseconds(v.getInt("HVD_SPIN_MICROSECONDS"));
  c.directSpinTime = std::chrono::microseconds(v.getInt("HVD_DIRECT_SPIN_MICROSECONDS"));
  c.fusionThresholdBytes = static_cast<std::size_t>(v.getInt("HVD_FUSION_THRESHOLD"));
  c.inlineAllreduceBytes = static_cast<std::size_t>(v.getInt("HVD_INLINE_ALLREDUCE_BYTES"));
  c.cycleTime = std::chrono::microseconds(
      static_cast<int64_t>(v.getDouble("HVD_CYCLE_TIME") * 1000.0));
  c.cacheCapacity = static_cast<std::size_t>(v.getInt("HVD_CACHE_CAPACITY"));
  c.autotune = v.getInt("HVD_AUTOTUNE") == 1;
  c.autotuneLog = v.getString("HVD_AUTOTUNE_LOG");
  c.autotuneWarmupSamples = static_cast<int>(v.getInt("HVD_AUTOTUNE_WARMUP_SAMPLES"));
  c.autotuneStepsPerSample = static_cast<int>(v.getInt("HVD_AUTOTUNE_STEPS_PER_SAMPLE"));
  c.autotuneMaxSamples = static_cast<int>(v.getInt("HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"));
  c.autotuneNoise = v.getDouble("HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE");
  c.fusionThresholdFixed = v.isSet("HVD_FUSION_THRESHOLD");
  c.cycleTimeFixed = v.isSet("HVD_CYCLE_TIME");
  params::checkCombinations(v);
  c.timelinePath = v.getString("HVD_TIMELINE");
  c.timelineMarkCycles = v.getInt("HVD_TIMELINE_MARK_CYCLES") == 1;
  c.networkInterface = v.getString("HVD_NETWORK_INTERFACE");
  c.stallCheck = v.getInt("HVD_STALL_CHECK_DISABLE") == 0;
  c.stallWarning = std::chrono::seconds(v.getInt("HVD_STALL_CHECK_TIME_SECONDS"));
  c.stallShutdown = std::chrono::seconds(v.getInt("HVD_STALL_SHUTDOWN_TIME_SECONDS"));
  c.livenessTimeout = std::chrono::seconds(v.getInt("HVD_LIVENESS_TIMEOUT_SECONDS"));
  if (c.stallShutdown.count() > 0 && c.stallShutdown < c.stallWarning)
    throw InvalidArgument(detail::concat(
        "HVD_STALL_SHUTDOWN_TIME_SECONDS=", c.stallShutdown.count(),
        " is shorter than HVD_STALL_CHECK_TIME_SECONDS=", c.stallWarning.count(),
        ": the job would fail before the stall is reported"));
  c.processSets = parseProcessSets(v.getString("HVD_PROCESS_SETS"), t.size);
  c.cpuBinding = cpuBindingFrom(v.getString("HVD_BIND_TO"));
  c.mallocRetainBytes = static_cast<std::size_t>(v.getInt("HVD_MALLOC_RETAIN_MB")) << 20;
  c.gradientOverlap = v.getString("HVD_GRADIENT_OVERLAP");
  c.checkReplicasEvery = parseCheckReplicas(v.getString("HVD_CHECK_REPLICAS"));
  c.gpuUseNccl = v.getString("HVD_GPU_BACKEND") == "nccl";
  c.hierarchicalAllreduce = v.getInt("HVD_HIERARCHICAL_ALLREDUCE") == 1;
  c.hierarchicalAllgather = v.getInt("HVD_HIERARCHICAL_ALLGATHER") == 1;
  c.logLevel = v.getString("HVD_LOG_LEVEL");
  c.logSubsystems = v.getString("HVD_LOG_SUBSYS");
  c.logHideTime = v.getInt("HVD_LOG_HIDE_TIME") == 1;
  c.elastic = v.getInt("HVD_ELASTIC") == 1;
  c.workerId = static_cast<int>(v.getInt("HVD_WORKER_ID"));
  c.elasticTimeout = std::chrono::seconds(v.getInt("HVD_ELASTIC_TIMEOUT"));
  if (c.elastic && (c.workerId < 0 || c.rendezvousAddr.empty()))
    throw InvalidArgument("HVD_ELASTIC=1 needs HVD_WORKER_ID and HVD_RENDEZVOUS_ADDR: elastic "
                          "workers are started by hvdrun");
  return c;
}

namespace {

Config fromSnapshot(std::map<std::string, std::string> env) {
  auto external = detectExternalLaunch(env);
  if (!external) return Config::fromParams(params::ParamValues::fromMap(env));
  for (const auto& [k, v] : external->params) env.insert({k, v});  // explicit HVD_* win
  // Read through the registry, so Horovod's names (HOROVOD_GLOO_RENDEZVOUS_ADDR, ...) count.
  auto values = params::ParamValues::fromMap(env);
  int64_t size = values.getInt("HVD_SIZE");
  if (size > 1) {
    const std::string how = " (the job script exports it to every rank; see docs/cluster.md)";
    if (values.getString("HVD_RENDEZVOUS_ADDR").empty())
      throw InvalidArgument(detail::concat(external->launcher, " started ", size,
                                           " ranks without hvdrun, but HVD_RENDEZVOUS_ADDR (rank "
                                           "0's host, where rank 0 serves the rendezvous) is not "
                                           "set", how));
    if (values.getInt("HVD_RENDEZVOUS_PORT") == 0)
      throw InvalidArgument(external->launcher + ": HVD_RENDEZVOUS_PORT is not set" + how);
    if (values.getString("HVD_SECRET").empty())
      throw InvalidArgument(external->launcher +
                            ": HVD_SECRET is not set; the ranks need a shared secret, e.g. "
                            "export HVD_SECRET=$(openssl rand -hex 32)" + how);
  }
  Config c = Config::fromParams(values);
  if (c.elastic)
    throw InvalidArgument(external->launcher + " started this rank with HVD_ELASTIC=1; elastic "
                          "jobs are started by hvdrun (--min-np, --host-discovery-script)");
  c.externalLauncher = external->launcher;
  c.servesRendezvous = size > 1 && c.topology.rank == 0;
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
