#include "bench/hvd_bench/command_line.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/hvd_bench/calibrate.h"
#include "bench/hvd_bench/collective_bench.h"
#include "bench/hvd_bench/engine_bench.h"
#include "bench/hvd_bench/negotiation_bench.h"
#ifdef HVD_BENCH_GPU
#include "bench/hvd_bench/gpu_bench.h"
#endif
#include "bench/hvd_bench/report.h"
#include "bench/hvd_bench/sim_bench.h"
#include "common/error.h"
#include "common/params.h"
#include "runtime/direct_collectives.h"
#include "runtime/runtime.h"

namespace hvd::bench {
namespace {

using runtime::Config;

// "4", "64K", "256M", "1G" -> bytes.
std::size_t parseSize(const std::string& text, const std::string& flag) {
  std::size_t multiplier = 1;
  std::string digits = text;
  if (!text.empty()) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K':
        multiplier = 1u << 10;
        digits.pop_back();
        break;
      case 'M':
        multiplier = 1u << 20;
        digits.pop_back();
        break;
      case 'G':
        multiplier = 1u << 30;
        digits.pop_back();
        break;
    }
  }
  return static_cast<std::size_t>(params::parseInt(digits, 0, INT64_MAX / 1024, flag)) * multiplier;
}

// Every flag's value; the modes read what is theirs.
struct Values {
  BenchOptions o;
  std::string minBytes = "8", maxBytes = "64M", stepBytes = "0", op = "allreduce",
              dtype = "float32", redop = "sum", placement = "both", json;
  int check = 1;
  bool engine = false;
  EngineBenchOptions eo;
  bool gpuMode = false;
  bool startup = false, startupFirst = false;
  int simulate = 0;
  SimBenchOptions so;
  std::string modelFile, algorithms;
  double nicGbps = 0, nicLatencyUs = -1;
  bool negotiation = false;
  NegotiationBenchOptions no;
  bool calibrateMode = false;
  std::string save;
};

void addOptions(CLI::App& app, Values& v) {
  auto& o = v.o;
  auto& eo = v.eo;
  auto& so = v.so;
  auto& no = v.no;
  app.add_option("-b,--minbytes", v.minBytes, "Smallest size (K, M, G suffixes)");
  app.add_option("-e,--maxbytes", v.maxBytes, "Largest size");
  app.add_option("-f,--stepfactor", o.stepFactor, "Multiply the size by this each row");
  app.add_option("-i,--stepbytes", v.stepBytes, "Or add this many bytes each row");
  app.add_option("-o,--op", v.op,
                 "allreduce, allgather, broadcast, alltoall, reducescatter, barrier");
  app.add_option("-d,--datatype", v.dtype, "Element type");
  app.add_option("-r,--root", o.root, "Root rank of broadcast");
  app.add_option("--redop", v.redop,
                 "Reduction: sum, average, min, max, product, adasum (float dtypes, a power-of-two "
                 "number of ranks)");
  app.add_option("-w,--warmup_iters", o.warmup, "Untimed runs before each measurement")
      ->check(CLI::Range(0, 1000000));
  app.add_option("-n,--iters", o.iterations, "Timed runs per measurement")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-c,--check", v.check, "Check results (1) or not (0)");
  app.add_option("--placement", v.placement,
                 "Which runs to time: both, out (out of place only) or in (in place only)");
  app.add_option("--json", v.json, "Also write the rows to this JSON file (rank 0)");
  app.add_flag("--engine", v.engine,
               "Instead of a sweep, time 100-tensor steps through the engine with fusion on and "
               "off, and a 4-byte allreduce's latency");
  app.add_option("--steps", eo.steps, "--engine: timed steps per list, configuration and round")
      ->check(CLI::Range(1, 100000));
  app.add_option("--rounds", eo.rounds,
                 "--engine: rounds, each timing fusion on and off on fresh runtimes, in "
                 "alternating order")
      ->check(CLI::Range(1, 1000));
  app.add_option("--latency-iters", eo.latencyIterations, "--engine: timed 4-byte allreduces")
      ->check(CLI::Range(10, 10000000));
  app.add_flag("--gpu", v.gpuMode,
               "Instead of a sweep, time GPU allreduces (-b to -e, -f, -w, -n): NCCL against a "
               "device copy and the fusion copy kernel (one rank), the engine on GPU against host "
               "buffers (any ranks); CUDA builds only");
  app.add_flag("--startup", v.startup,
               "Instead of a sweep, initialise as hvd_init does, pass a barrier, and print "
               "'HVD_INITIALISED <unix time ns>' (for bench/startup_time.py)");
  app.add_flag("--startup-first", v.startupFirst,
               "As --startup, then shut that runtime down and run the sweep: one launch gives "
               "both the launch time and the sweep (for bench/fake_hosts.py)");
  app.add_option("--simulate", v.simulate,
                 "Instead of a sweep, simulate an allreduce (or -o broadcast) on this many ranks "
                 "(virtual time, one "
                 "process; no hvdrun): every algorithm against the lower bound and the cost "
                 "model's choice, -b to -e by -f")
      ->check(CLI::Range(1, 65536));
  app.add_option("--model", v.modelFile,
                 "--simulate: the network model, JSON (fields: HVD_NETWORK_MODEL in "
                 "docs/environment.md); default: "
                 "100 Gb/s NICs and this class of machine within a host");
  app.add_option("--ranks-per-host", so.model.ranksPerHost,
                 "--simulate: the topology's ranks per host")
      ->check(CLI::Range(1, 65536));
  app.add_option("--hosts-per-switch", so.model.hostsPerSwitch,
                 "--simulate: hosts per switch (0: one switch)")
      ->check(CLI::Range(0, 65536));
  app.add_option("--nic-gbps", v.nicGbps, "--simulate: NIC bandwidth in Gbit/s")
      ->check(CLI::PositiveNumber);
  app.add_option("--nic-latency-us", v.nicLatencyUs, "--simulate: NIC latency in microseconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--algorithms", v.algorithms,
                 "--simulate: comma-separated, of recursive_doubling, ring, rabenseifner, "
                 "hierarchical (default: all that fit the topology)");
  app.add_flag("--negotiation", v.negotiation,
               "Instead of a sweep, time rank 0's coordinator per cycle (decode every rank's "
               "requests, check, fuse, encode the responses) at 16 to 4,096 ranks; no hvdrun");
  app.add_option("--negotiation-tensors", no.tensors, "--negotiation: allreduces per cycle")
      ->check(CLI::Range(1, 100000));
  app.add_flag("--calibrate", v.calibrateMode,
               "Instead of a sweep, measure the link between 2 ranks (within a host, or between "
               "two) and the reduction speed, and print the network model; with --save, write it "
               "(merged into that file when it exists) for --simulate --model and the "
               "HVD_NETWORK_MODEL variable");
  app.add_option("--save", v.save, "--calibrate: the model file to write");
}

// Sizes, operation and checks of the sweep (and the sizes other modes borrow).
void resolveSweep(Values& v) {
  v.o.minBytes = parseSize(v.minBytes, "-b");
  v.o.maxBytes = parseSize(v.maxBytes, "-e");
  v.o.stepBytes = parseSize(v.stepBytes, "-i");
  v.o.op = parseCollective(v.op);
  v.o.dtype = collectives::parseDType(v.dtype);
  v.o.redop = collectives::parseReduceOp(v.redop);
  v.o.check = v.check != 0;
  v.o.placement = parsePlacement(v.placement);
  if (v.startupFirst && (v.simulate > 0 || v.negotiation || v.calibrateMode || v.startup))
    throw InvalidArgument(
        "--startup-first goes before a sweep, --gpu or --engine; not with --simulate, "
        "--negotiation, --calibrate or --startup");
}

int simulateMode(Values& v, const CLI::App& app) {
  auto& so = v.so;
  if (!v.modelFile.empty()) {
    int perHost = so.model.ranksPerHost, perSwitch = so.model.hostsPerSwitch;
    so.model = collectives::NetworkModel::fromFile(v.modelFile, "--model " + v.modelFile);
    if (app.count("--ranks-per-host")) so.model.ranksPerHost = perHost;
    if (app.count("--hosts-per-switch")) so.model.hostsPerSwitch = perSwitch;
  }
  if (v.nicGbps > 0) so.model.interHost.bytesPerSecond = v.nicGbps * 1e9 / 8;
  if (v.nicLatencyUs >= 0) so.model.interHost.latencySeconds = v.nicLatencyUs * 1e-6;
  so.model.validate("--simulate");
  so.ranks = v.simulate;
  so.op = v.op;
  if (app.count("--minbytes")) so.minBytes = v.o.minBytes;
  if (app.count("--maxbytes")) so.maxBytes = v.o.maxBytes;
  if (app.count("--stepfactor")) so.stepFactor = v.o.stepFactor;
  std::stringstream list(v.algorithms);
  for (std::string name; std::getline(list, name, ',');) so.algorithms.push_back(name);
  auto result = runSimBench(so);
  printSimReport(std::cout, result);
  if (!v.json.empty()) writeSimJson(v.json, result);
  return 0;
}

int negotiationMode(Values& v) {
  auto result = runNegotiationBench(v.no);
  printNegotiationReport(std::cout, result);
  if (!v.json.empty()) writeNegotiationJson(v.json, result);
  return 0;
}

int calibrateMode(Values& v, Config config) {
  collectives::NetworkModel base;
  // Merged into the file when it exists: calibrating one link keeps the other's figures.
  if (!v.save.empty() && std::filesystem::exists(v.save))
    base = collectives::NetworkModel::fromFile(v.save, "--save " + v.save);
  config.engine.executor.allreduceAlgorithm = collectives::AllreduceAlgorithm::RecursiveDoubling;
  auto rt = runtime::DirectCollectives::create(config);
  auto c = calibrate(*rt, base, config.transport == runtime::Transport::Tcp);
  if (rt->topology().rank == 0) {
    printCalibration(std::cout, c);
    if (!v.save.empty()) {
      std::ofstream out(v.save);
      if (!out) throw InvalidArgument("--save: cannot write " + v.save);
      out << c.model.toJson() << "\n";
    }
  }
  rt->barrier();
  return 0;
}

// Initialises as hvd_init does, passes a barrier, prints 'HVD_INITIALISED <unix time ns>' (the
// launch benchmarks take the last rank's line) and shuts the runtime down.
void stampInitialised(const Config& config) {
  auto rt = runtime::Runtime::create(config);
  rt->barrier();
  auto now = std::chrono::system_clock::now().time_since_epoch();
  std::printf(
      "HVD_INITIALISED %lld\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
  std::fflush(stdout);
  rt->shutdown();  // collective: no rank leaves while another still talks to it
}

int gpuMode([[maybe_unused]] Values& v, [[maybe_unused]] const CLI::App& app,
            [[maybe_unused]] const Config& config) {
#ifdef HVD_BENCH_GPU
  GpuBenchOptions g;
  if (app.count("--minbytes")) g.minBytes = v.o.minBytes;
  if (app.count("--maxbytes")) g.maxBytes = v.o.maxBytes;
  if (app.count("--stepfactor")) g.stepFactor = v.o.stepFactor;
  g.warmup = v.o.warmup;
  g.iterations = v.o.iterations;
  auto result = runGpuBench(config, g);
  if (config.topology.rank == 0) {
    printGpuReport(std::cout, result);
    if (!v.json.empty()) writeGpuJson(v.json, result);
  }
  return 0;
#else
  throw InvalidArgument("--gpu: this build of hvd has no GPU support");
#endif
}

int engineMode(Values& v, const Config& config) {
  auto result = runEngineBench(config, v.eo);
  if (config.topology.rank == 0) {
    printEngineReport(std::cout, result);
    if (!v.json.empty()) writeEngineJson(v.json, result);
  }
  return 0;
}

int sweepMode(Values& v, const Config& config) {
  auto rt = runtime::DirectCollectives::create(config);
  auto rows = runSweep(*rt, v.o);
  if (rt->topology().rank == 0) {
    printTable(std::cout, v.o, rt->topology().size, rows);
    if (!v.json.empty())
      writeJson(v.json, v.o, rt->topology().size, rows,
                {{"transport", runtime::transportName(config.transport)},
                 {"hierarchical_allreduce", config.hierarchicalAllreduce ? "on" : "off"},
                 {"hierarchical_allgather", config.hierarchicalAllgather ? "on" : "off"}});
  }
  rt->barrier();
  for (const auto& r : rows)
    if (r.outOfPlace.wrong > 0 || r.inPlace.wrong > 0) return 1;
  return 0;
}

// The modes without a job come first: they need no hvdrun and no runtime configuration.
int runMode(Values& v, const CLI::App& app) {
  resolveSweep(v);
  if (v.simulate > 0) return simulateMode(v, app);
  if (v.negotiation) return negotiationMode(v);
  auto config = Config::fromEnvironment();
  if (v.calibrateMode) return calibrateMode(v, config);
  if (v.startup || v.startupFirst) stampInitialised(config);
  if (v.startup) return 0;
  if (v.gpuMode) return gpuMode(v, app, config);
  if (v.engine) return engineMode(v, config);
  return sweepMode(v, config);
}

}  // namespace

int runCommandLine(int argc, char** argv) {
  Values v;
  CLI::App app{"hvd-bench: time hvd's collectives over a sweep of sizes (run under hvdrun)"};
  addOptions(app, v);
  CLI11_PARSE(app, argc, argv);
  try {
    return runMode(v, app);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "hvd-bench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-bench: %s\n", e.what());
    return 1;
  }
}

}  // namespace hvd::bench
