// The runtime's immutable configuration, parsed once from the HVD_* parameters in
// Runtime::create and passed by reference from there. The parameter table
// (common/param_table.h) names the member each parameter fills; runtime/config_fields.cc fills
// them, and fromParams checks the combinations.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithms/allreduce.h"
#include "common/params.h"
#include "common/topology.h"
#include "runtime/cpu_binding.h"
#include "runtime/engine/engine_options.h"

namespace hvd::runtime {

using hvd::Topology;

// HVD_TRANSPORT: which transport carries host-memory links.
enum class Transport { Auto, Tcp, Shm };
const char* transportName(Transport t);  // as HVD_TRANSPORT spells it

struct Config {
  Topology topology;
  std::string rendezvousAddr;  // empty: single-rank job without a launcher
  uint16_t rendezvousPort = 0;
  std::string secret;
  std::string jobId;
  std::string networkInterface;  // empty: the address that reaches the rendezvous
  // Set by an elastic round, not by the environment: the address to listen on for peers when
  // this worker reaches hvdrun over loopback but the round has workers on other hosts.
  std::string peerAddress;
  std::chrono::milliseconds startTimeout{};
  std::chrono::milliseconds handshakeTimeout{};  // HVD_HANDSHAKE_TIMEOUT_SECONDS
  std::chrono::milliseconds opTimeout{};
  // How long a caller waits on a handle: twice the op timeout. The engine fails a hung
  // operation within the op timeout of its last progress, with the specific reason (the peer,
  // the NCCL call); this limit is only the safety net behind it, and must not fire first.
  std::chrono::milliseconds handleWaitLimit() const { return 2 * opTimeout; }
  // HVD_NETWORK_MODEL (or the built-in one) as the file says; the job's ranks per host are
  // set on the World's copy (World::networkModel). Never null after fromParams.
  std::shared_ptr<const collectives::NetworkModel> networkModel;
  // With HVD_NETWORK_MODEL unset: the model hvd-bench calibrate saved for this host, when there
  // is one (machineNetworkModelPath). A world within one host uses it instead of the built-in
  // model (World::networkModel); a world across hosts, whose ranks must agree, never does.
  std::string hostCalibrationPath;
  std::size_t socketBufferBytes = 0;
  Transport transport = Transport::Auto;
  std::size_t shmBufferBytes = 0;
  std::chrono::microseconds directSpinTime{0};
  // The engine's options (runtime/engine/engine_options.h): the rows tagged Engine,
  // Coordinator, Executor and Autotune fill them (HVD_FUSION_THRESHOLD, HVD_CYCLE_TIME, the
  // stall checks, the cache, the timeline, the liveness timeout, HVD_SPIN_MICROSECONDS, the
  // allreduce algorithm and segment size, HVD_AUTOTUNE*, ...); fromParams derives the rest.
  EngineOptions engine;
  std::vector<std::vector<int32_t>> processSets;  // static sets, created at init
  CpuBinding cpuBinding = CpuBinding::Core;
  std::size_t mallocRetainBytes = 0;     // HVD_MALLOC_RETAIN_MB (runtime/malloc_retention.h)
  std::string gradientOverlap = "auto";  // HVD_GRADIENT_OVERLAP; read by hvd.torch's optimizer
  // HVD_CHECK_REPLICAS, read by the Python frontends: -1 off, 0 after the first update only,
  // N > 0 after the first update and every N updates.
  int checkReplicasEvery = 0;
  // OMP_NUM_THREADS is set: the user chose the frameworks' thread counts, and the frontends
  // leave them alone (Runtime::computeThreads).
  bool computeThreadsChosen = false;
  bool hierarchicalAllreduce = false;  // HVD_HIERARCHICAL_ALLREDUCE=1
  bool hierarchicalAllgather = false;  // HVD_HIERARCHICAL_ALLGATHER=1
  std::string logLevel;
  std::string logSubsystems;
  bool logHideTime = false;  // HVD_LOG_HIDE_TIME=1

  // Set when srun/mpirun started this rank without hvdrun (external_launch.h), or to
  // HVD_EXTERNAL_LAUNCHER (Spark, Ray): names that launcher.
  std::string externalLauncher;
  // Rank 0 of a job of several ranks that such a launcher started serves the rendezvous itself.
  bool servesRendezvous() const {
    return !externalLauncher.empty() && topology.size > 1 && topology.rank == 0;
  }
  // Ranks that srun started with no HVD_SECRET: rank 0 makes the secret and the others get it
  // from rank 0 in munge credentials (munge_secret.h); connectWorld fills `secret` in.
  bool secretFromMunge = false;

  // An elastic job's worker (HVD_ELASTIC=1): Runtime::create replaces the topology with this
  // worker's placement in hvdrun's newest round (elastic_rounds.h).
  bool elastic = false;
  int workerId = -1;
  std::chrono::milliseconds elasticTimeout{};
  std::string elasticCommitDir;  // HVD_ELASTIC_COMMIT_DIR; read by hvd.elastic

  // Replaces the placement (an elastic round's) and the engine options that follow from it.
  void setTopology(Topology placement);

  // Throws InvalidArgument naming the variable for an invalid or inconsistent value.
  // `secretFromMunge`: a job of several ranks without HVD_SECRET is valid (see above).
  static Config fromParams(const params::ParamValues& values, bool secretFromMunge = false);
  // The process environment, with the placement an external launcher gave (if any) applied.
  static Config fromEnvironment();
};

// The engine's options with the parameter table's defaults (what a process without HVD_*
// variables gets): where tests and hvd-bench start from, since the options structs' own
// members start at zero.
EngineOptions defaultEngineOptions();

}  // namespace hvd::runtime
