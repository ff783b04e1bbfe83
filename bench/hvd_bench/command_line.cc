#include "bench/hvd_bench/command_line.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "bench/hvd_bench/calibrate.h"
#include "bench/hvd_bench/collective_bench.h"
#include "bench/hvd_bench/engine_bench.h"
#include "bench/hvd_bench/negotiation_bench.h"
#include "runtime/config_fields.h"
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

// Every option's value; each subcommand reads what is its own and the sweep's sizes.
struct Values {
  BenchOptions o;
  std::string minBytes = "8", maxBytes = "64M", stepBytes = "0", op = "allreduce",
              dtype = "float32", redop = "sum", placement = "both", json;
  int check = 1;
  bool startupFirst = false;
  EngineBenchOptions eo;
  int simulate = 0;
  SimBenchOptions so;
  std::string modelFile, algorithms;
  double nicGbps = 0, nicLatencyUs = -1;
  NegotiationBenchOptions no;
  std::string save;
};

// The sweep's options, on the command itself: they come before or after a subcommand's name
// (the subcommands fall through to them), and gpu and simulate take their sizes from them.
void addSweepOptions(CLI::App& app, Values& v) {
  auto& o = v.o;
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
  app.add_flag("--startup-first", v.startupFirst,
               "Before the sweep (or gpu, engine): initialise as hvd_init does, pass a barrier, "
               "print 'HVD_INITIALISED <unix time ns>' and shut that runtime down: one launch "
               "gives both the launch time and the sweep (for bench/fake_hosts.py)");
}

void addEngineOptions(CLI::App& cmd, Values& v) {
  cmd.add_option("--steps", v.eo.steps, "Timed steps per list, configuration and round")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--rounds", v.eo.rounds,
                 "Rounds, each timing fusion on and off on fresh runtimes, in alternating order")
      ->check(CLI::Range(1, 1000));
  cmd.add_option("--latency-iters", v.eo.latencyIterations, "Timed 4-byte allreduces")
      ->check(CLI::Range(10, 10000000));
}

void addSimulateOptions(CLI::App& cmd, Values& v) {
  auto& so = v.so;
  cmd.add_option("ranks", v.simulate, "Simulated ranks")->required()->check(CLI::Range(1, 65536));
  cmd.add_option("--model", v.modelFile,
                 "The network model, JSON (fields: HVD_NETWORK_MODEL in docs/environment.md); "
                 "default: 100 Gb/s NICs and this class of machine within a host");
  cmd.add_option("--ranks-per-host", so.model.ranksPerHost, "The topology's ranks per host")
      ->check(CLI::Range(1, 65536));
  cmd.add_option("--hosts-per-switch", so.model.hostsPerSwitch, "Hosts per switch (0: one switch)")
      ->check(CLI::Range(0, 65536));
  cmd.add_option("--nic-gbps", v.nicGbps, "NIC bandwidth in Gbit/s")->check(CLI::PositiveNumber);
  cmd.add_option("--nic-latency-us", v.nicLatencyUs, "NIC latency in microseconds")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--algorithms", v.algorithms,
                 "Comma-separated, of recursive_doubling, ring, rabenseifner, hierarchical "
                 "(default: all that fit the topology)");
}

void addNegotiationOptions(CLI::App& cmd, Values& v) {
  cmd.add_option("--tensors", v.no.tensors, "Allreduces per cycle")->check(CLI::Range(1, 100000));
}

void addCalibrateOptions(CLI::App& cmd, Values& v) {
  cmd.add_option("--save", v.save,
                 "The model file to write (merged into it when it exists), for simulate --model "
                 "and HVD_NETWORK_MODEL; within a host the default is this host's, which its "
                 "jobs use when HVD_NETWORK_MODEL is unset");
}

// Sizes, operation and checks of the sweep (and the sizes other subcommands borrow).
void resolveSweep(Values& v) {
  v.o.minBytes = parseSize(v.minBytes, "-b");
  v.o.maxBytes = parseSize(v.maxBytes, "-e");
  v.o.stepBytes = parseSize(v.stepBytes, "-i");
  v.o.op = parseCollective(v.op);
  v.o.dtype = collectives::parseDType(v.dtype);
  v.o.redop = collectives::parseReduceOp(v.redop);
  v.o.check = v.check != 0;
  v.o.placement = parsePlacement(v.placement);
}

int simulateMode(Values& v, const CLI::App& cmd, const Config*) {
  auto& so = v.so;
  const CLI::App& app = *cmd.get_parent();
  if (!v.modelFile.empty()) {
    int perHost = so.model.ranksPerHost, perSwitch = so.model.hostsPerSwitch;
    so.model = collectives::NetworkModel::fromFile(v.modelFile, "--model " + v.modelFile);
    if (cmd.count("--ranks-per-host")) so.model.ranksPerHost = perHost;
    if (cmd.count("--hosts-per-switch")) so.model.hostsPerSwitch = perSwitch;
  }
  if (v.nicGbps > 0) so.model.interHost.bytesPerSecond = v.nicGbps * 1e9 / 8;
  if (v.nicLatencyUs >= 0) so.model.interHost.latencySeconds = v.nicLatencyUs * 1e-6;
  so.model.validate("simulate");
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

int negotiationMode(Values& v, const CLI::App&, const Config*) {
  auto result = runNegotiationBench(v.no);
  printNegotiationReport(std::cout, result);
  if (!v.json.empty()) writeNegotiationJson(v.json, result);
  return 0;
}

int calibrateMode(Values& v, const CLI::App& cmd, const Config* job) {
  Config config = *job;
  const runtime::Topology& topology = config.topology;
  bool sameHost = topology.localSize == topology.size;
  // Within a host, the model is this host's: saved where jobs within it find it.
  std::string save = v.save;
  if (save.empty() && sameHost) save = runtime::machineNetworkModelPath();
  if (save.empty())
    throw InvalidArgument(
        "calibrate: between hosts, --save FILE names the model file (then HVD_NETWORK_MODEL)");
  collectives::NetworkModel base;
  // Merged into the file when it exists: calibrating one link keeps the other's figures.
  // A file calibrate cannot read (damaged, another version's) is replaced: calibrating is how
  // a user mends it.
  if (std::filesystem::exists(save)) {
    try {
      base = collectives::NetworkModel::fromFile(save, save);
    } catch (const InvalidArgument& e) {
      if (topology.rank == 0)
        std::cerr << "hvd-bench: calibrate: replacing a model it cannot read: " << e.what() << "\n";
    }
  }
  // The layouts whose tables held up: 2 ranks within a host, one rank per host across hosts.
  // Where ranks share a host's cores with each other, a small allreduce's time swings by more
  // than the algorithms differ (16 ranks on 2 cores: a table picked a flat algorithm that ran
  // 2.3x slower at 4 B than the staged form the cost model picks), so the model decides there.
  if (sameHost && topology.size != 2)
    throw InvalidArgument(detail::concat(
        "calibrate: within a host it measures 2 ranks (their table serves 2-rank jobs), not ",
        topology.size, ": run it with -np 2"));
  // This run measures the machine itself, not through a model it is about to replace, and each
  // runtime runs the one flat algorithm it is named for.
  config.hostCalibrationPath.clear();
  auto direct = [&](collectives::AllreduceAlgorithm algorithm) {
    Config c = config;
    c.engine.executor.allreduceAlgorithm = algorithm;
    c.hierarchicalAllreduce = false;
    return runtime::DirectCollectives::create(c);
  };
  auto rt = direct(collectives::AllreduceAlgorithm::RecursiveDoubling);
  double mostOnAHost = topology.localSize;
  collectives::Tensor counts{&mostOnAHost, collectives::DType::Float64, {1}};
  rt->allreduce(counts, counts, collectives::ReduceOp::Max);
  if (!sameHost && mostOnAHost > 1)
    throw InvalidArgument(detail::concat(
        "calibrate: across hosts it measures one rank per host (-H host:1,...), not up to ",
        mostOnAHost,
        " (with several ranks per host the cost model chooses, staging by host where it "
        "pays)"));
  // On two ranks, the link and the reduction speed too; on more, the table alone, over the
  // links' figures the file (or the built-in model) has.
  std::optional<Calibration> link;
  if (topology.size == 2) link = calibrate(*rt, base, config.transport == runtime::Transport::Tcp);
  collectives::NetworkModel model = link ? link->model : base;
  std::size_t largest =
      cmd.get_parent()->count("--maxbytes") ? v.o.maxBytes : std::size_t{16} << 20;
  auto ring = direct(collectives::AllreduceAlgorithm::Ring);
  auto rabenseifner = direct(collectives::AllreduceAlgorithm::Rabenseifner);
  auto table =
      measureAllreduce({{collectives::AllreduceAlgorithm::RecursiveDoubling, rt.get()},
                        {collectives::AllreduceAlgorithm::Ring, ring.get()},
                        {collectives::AllreduceAlgorithm::Rabenseifner, rabenseifner.get()}},
                       rt->linkName(), topology.size, topology.localSize, largest);
  model.setMeasured(table);
  if (rt->topology().rank == 0) {
    if (link) printCalibration(std::cout, *link);
    printMeasuredAllreduce(std::cout, table);
    saveModel(save, model);
    std::cout << "# saved to " << save
              << (v.save.empty() ? " (jobs within this host use it unless HVD_NETWORK_MODEL names "
                                   "another file)\n"
                                 : "\n");
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

int gpuMode([[maybe_unused]] Values& v, [[maybe_unused]] const CLI::App& cmd,
            [[maybe_unused]] const Config* job) {
#ifdef HVD_BENCH_GPU
  const Config& config = *job;
  const CLI::App& app = *cmd.get_parent();
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
  throw InvalidArgument("gpu: this build of hvd has no GPU support");
#endif
}

int engineMode(Values& v, const CLI::App&, const Config* job) {
  const Config& config = *job;
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

int startupMode(Values&, const CLI::App&, const Config* job) {
  stampInitialised(*job);
  return 0;
}

// hvd-bench's subcommands; without one it runs the sweep.
struct Subcommand {
  const char* name;
  const char* help;
  bool needsJob;           // runs under hvdrun, with the runtime's configuration
  bool afterStartupFirst;  // --startup-first may come before it
  void (*addOptions)(CLI::App&, Values&);
  int (*run)(Values&, const CLI::App& self, const Config* job);
};

const Subcommand kSubcommands[] = {
    {"engine",
     "Time 100-tensor steps through the engine with fusion on and off, and a 4-byte "
     "allreduce's latency",
     true, true, addEngineOptions, engineMode},
    {"gpu",
     "Time GPU allreduces (-b to -e, -f, -w, -n): NCCL against a device copy and the fusion "
     "copy kernel (one rank), the engine on GPU against host buffers (any ranks); CUDA builds "
     "only",
     true, true, nullptr, gpuMode},
    {"startup",
     "Initialise as hvd_init does, pass a barrier, and print 'HVD_INITIALISED <unix time ns>' "
     "(for bench/startup_time.py)",
     true, false, nullptr, startupMode},
    {"calibrate",
     "Time each allreduce algorithm by size on this job's ranks and hosts (up to -e, default "
     "16 MiB), on 2 ranks also the link and the reduction speed, and save the network model",
     true, false, addCalibrateOptions, calibrateMode},
    {"simulate",
     "Simulate an allreduce (or -o broadcast) on this many ranks (virtual time, one process; no "
     "hvdrun): every algorithm against the lower bound and the cost model's choice, -b to -e by "
     "-f",
     false, false, addSimulateOptions, simulateMode},
    {"negotiation",
     "Time rank 0's coordinator per cycle (decode every rank's requests, check, fuse, encode the "
     "responses) at 16 to 4,096 ranks; no hvdrun",
     false, false, addNegotiationOptions, negotiationMode},
};

int run(Values& v, const CLI::App& app) {
  resolveSweep(v);
  const Subcommand* sub = nullptr;  // none: the sweep
  const CLI::App* cmd = nullptr;
  for (const auto& s : kSubcommands) {
    if (!app.get_subcommand(s.name)->parsed()) continue;
    sub = &s;
    cmd = app.get_subcommand(s.name);
  }
  if (sub && v.startupFirst && !sub->afterStartupFirst)
    throw InvalidArgument(
        std::string("--startup-first goes before a sweep, gpu or engine; not with ") + sub->name);
  if (sub && !sub->needsJob) return sub->run(v, *cmd, nullptr);
  auto config = Config::fromEnvironment();
  if (v.startupFirst) stampInitialised(config);
  return sub ? sub->run(v, *cmd, &config) : sweepMode(v, config);
}

}  // namespace

int runCommandLine(int argc, char** argv) {
  Values v;
  CLI::App app{
      "hvd-bench: time hvd's collectives over a sweep of sizes (run under hvdrun), or run one "
      "of its subcommands"};
  app.fallthrough();  // the sweep's options also after a subcommand's name
  app.require_subcommand(0, 1);
  addSweepOptions(app, v);
  for (const auto& sub : kSubcommands) {
    CLI::App* cmd = app.add_subcommand(sub.name, sub.help);
    if (sub.addOptions) sub.addOptions(*cmd, v);
  }
  CLI11_PARSE(app, argc, argv);
  try {
    return run(v, app);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "hvd-bench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-bench: %s\n", e.what());
    return 1;
  }
}

}  // namespace hvd::bench
