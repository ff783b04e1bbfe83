// hvd._core: the engine's asynchronous API for Python. Tensors arrive as DLPack arrays through
// nanobind's ndarray (NumPy, PyTorch, TensorFlow, JAX alike, without copies and without linking
// any framework); results the engine allocates go back the same way, owned by the array.
//
// The current Runtime is the process's one, which the C API shares (runtime/current_runtime.h);
// the module keeps no Runtime of its own. The engine thread never touches Python objects, so
// waits release the GIL and cannot deadlock on it, and init and shutdown release it before
// they wait for each other.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <optional>
#include <vector>

#include "collectives/gpu/gpu_build.h"
#include "common/logging.h"
#include "python/src/operations.h"
#include "runtime/current_runtime.h"

namespace nb = nanobind;
using namespace hvd;
using namespace hvd::runtime;
using hvd::python::bindOperations;
using hvd::python::currentRuntime;

namespace {

void init(std::optional<std::vector<std::vector<int32_t>>> processSets) {
  nb::gil_scoped_release release;
  runtime::current_runtime::init([&] {
    auto config = Config::fromEnvironment();
    if (processSets) config.processSets = *processSets;
    return config;
  });
}

void shutdown() {
  nb::gil_scoped_release release;
  runtime::current_runtime::shutdown();
}

// Logs through the current Runtime's loggers (its rank's prefix), or the process's before init.
void logLine(const std::string& subsystem, spdlog::level::level_enum level,
             const std::string& text) {
  auto rt = runtime::current_runtime::get();
  log::Logs& logs = rt ? rt->logs() : log::processLogs();
  logs.get(subsystem)->log(level, "{}", text);
}

template <int Topology::*Field>
int topologyValue() {
  return currentRuntime()->topology().*Field;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "hvd's runtime: the engine's asynchronous collectives on DLPack tensors";
  // A script that ends with operations in flight (a backward without its step) leaves Handles
  // in objects Python does not free at exit; nanobind's report of them ("leaked 2 instances
  // ... reference counting issue in the binding code") would read as a bug in hvd.
  nb::set_leak_warnings(false);

  bindOperations(m);

  m.def("init", &init, nb::arg("process_sets") = nb::none());
  m.def("shutdown", &shutdown);
  m.def("is_initialized", [] { return runtime::current_runtime::get() != nullptr; });
  m.def("rank", &topologyValue<&Topology::rank>);
  m.def("size", &topologyValue<&Topology::size>);
  m.def("local_rank", &topologyValue<&Topology::localRank>);
  m.def("local_size", &topologyValue<&Topology::localSize>);
  m.def("cross_rank", &topologyValue<&Topology::crossRank>);
  m.def("cross_size", &topologyValue<&Topology::crossSize>);
  m.def("hostname", [] { return currentRuntime()->topology().hostname; });
  m.def(
      "elastic_round", [] { return currentRuntime()->elasticRound(); },
      "This elastic worker's round; -1 outside an elastic job.");
  m.def(
      "elastic_newest_round",
      [] {
        auto rt = currentRuntime();
        nb::gil_scoped_release release;
        return rt->newestElasticRound();
      },
      "The newest round hvdrun has published (asks the rendezvous); -1 outside an elastic job.");
  m.def("compute_threads", [] { return currentRuntime()->computeThreads(); });
  m.def(
      "cpu_share", [] { return currentRuntime()->cpuShare(); },
      "The compute threads this rank's CPUs can run without sharing a core with another rank.");
  m.def(
      "elastic_commit_dir", [] { return currentRuntime()->config().elasticCommitDir; },
      "HVD_ELASTIC_COMMIT_DIR: where rank 0 writes each elastic commit; empty: nowhere.");
  m.def(
      "gradient_overlap", [] { return currentRuntime()->config().gradientOverlap; },
      "HVD_GRADIENT_OVERLAP: auto, on or off.");
  m.def(
      "check_replicas_every", [] { return currentRuntime()->config().checkReplicasEvery; },
      "HVD_CHECK_REPLICAS: -1 off, 0 after the first update only, N also every N updates.");
  // The frontends log through the runtime's facade, so HVD_LOG_LEVEL and the rank prefix apply.
  m.def("log_info", [](const std::string& subsystem, const std::string& text) {
    logLine(subsystem, spdlog::level::info, text);
  });
  m.def("log_warn", [](const std::string& subsystem, const std::string& text) {
    logLine(subsystem, spdlog::level::warn, text);
  });
  m.def("op_timeout_seconds",
        [] { return std::chrono::duration<double>(currentRuntime()->config().opTimeout).count(); });

  m.def(
      "build_info",
      [] {
        auto b = collectives::gpu::gpuBuild(false);
        nb::dict d;
        d["cuda"] = b.cuda;
        d["nccl"] = b.nccl;
        d["cuda_version"] = b.cudaVersion;
        d["nccl_version"] = b.ncclVersion;
        d["nccl_version_code"] = b.ncclVersionCode;
        d["cuda_devices"] = static_cast<int>(b.devices.size());
        return d;
      },
      "What this build supports (CUDA, NCCL and their versions) and the CUDA devices it sees.");

  m.def(
      "process_set_ranks", [](int id) { return currentRuntime()->engine().processSet(id); },
      nb::arg("id"));
  m.def("process_set_ids", [] { return currentRuntime()->engine().processSetIds(); });
  m.def(
      "start_timeline",
      [](const std::string& path, bool markCycles) {
        currentRuntime()->engine().startTimeline(path, markCycles);
      },
      nb::arg("path"), nb::arg("mark_cycles") = false);
  m.def("stop_timeline", [] { currentRuntime()->engine().stopTimeline(); });
  m.def("stats", [] {
    EngineStats s = currentRuntime()->engine().stats();
    nb::dict d;
    d["submitted"] = s.submitted;
    d["cache_hits"] = s.cacheHits;
    d["cache_misses"] = s.cacheMisses;
    d["collectives"] = s.collectives;
    d["fused_tensors"] = s.fusedTensors;
    d["inline_allreduces"] = s.inlineAllreduces;
    d["response_lists"] = s.responseLists;
    d["autotune_samples"] = s.autotuneSamples;
    return d;
  });

  nb::dict ops;
  ops["allreduce"] = static_cast<int>(OpType::Allreduce);
  ops["allgather"] = static_cast<int>(OpType::Allgather);
  ops["broadcast"] = static_cast<int>(OpType::Broadcast);
  ops["alltoall"] = static_cast<int>(OpType::Alltoall);
  ops["reducescatter"] = static_cast<int>(OpType::Reducescatter);
  ops["barrier"] = static_cast<int>(OpType::Barrier);
  ops["join"] = static_cast<int>(OpType::Join);
  ops["add_process_set"] = static_cast<int>(OpType::AddProcessSet);
  ops["remove_process_set"] = static_cast<int>(OpType::RemoveProcessSet);
  m.attr("OP_TYPES") = ops;
  nb::dict reduceOps;
  reduceOps["sum"] = static_cast<int>(ReduceOp::Sum);
  reduceOps["average"] = static_cast<int>(ReduceOp::Average);
  reduceOps["min"] = static_cast<int>(ReduceOp::Min);
  reduceOps["max"] = static_cast<int>(ReduceOp::Max);
  reduceOps["product"] = static_cast<int>(ReduceOp::Product);
  reduceOps["adasum"] = static_cast<int>(ReduceOp::Adasum);
  m.attr("REDUCE_OPS") = reduceOps;
  nb::list dtypes;
  for (DType t : collectives::allDTypes()) dtypes.append(collectives::dtypeName(t));
  m.attr("DTYPES") = nb::tuple(dtypes);
}
