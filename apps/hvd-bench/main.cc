// hvd-bench: nccl-tests-style sweep of one collective, run as a worker under hvdrun:
//   hvdrun -np 2 hvd-bench -b 4 -e 256M -f 4 -o allreduce -d float32 --json out.json
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

namespace {

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
  return static_cast<std::size_t>(hvd::params::parseInt(digits, 0, INT64_MAX / 1024, flag)) *
         multiplier;
}

// Initialises as hvd_init does, passes a barrier, prints 'HVD_INITIALISED <unix time ns>' (the
// launch benchmarks take the last rank's line) and shuts the runtime down.
void stampInitialised(const hvd::runtime::Config& config) {
  auto rt = hvd::runtime::Runtime::create(config);
  rt->barrier();
  auto now = std::chrono::system_clock::now().time_since_epoch();
  std::printf(
      "HVD_INITIALISED %lld\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
  std::fflush(stdout);
  rt->shutdown();  // collective: no rank leaves while another still talks to it
}

}  // namespace

int main(int argc, char** argv) {
  hvd::bench::BenchOptions o;
  std::string minBytes = "8", maxBytes = "64M", stepBytes = "0", op = "allreduce",
              dtype = "float32", redop = "sum", placement = "both", json;
  int check = 1;
  CLI::App app{"hvd-bench: time hvd's collectives over a sweep of sizes (run under hvdrun)"};
  app.add_option("-b,--minbytes", minBytes, "Smallest size (K, M, G suffixes)");
  app.add_option("-e,--maxbytes", maxBytes, "Largest size");
  app.add_option("-f,--stepfactor", o.stepFactor, "Multiply the size by this each row");
  app.add_option("-i,--stepbytes", stepBytes, "Or add this many bytes each row");
  app.add_option("-o,--op", op,
                 "allreduce, allgather, broadcast, alltoall, reducescatter, barrier");
  app.add_option("-d,--datatype", dtype, "Element type");
  app.add_option("-r,--root", o.root, "Root rank of broadcast");
  app.add_option("--redop", redop,
                 "Reduction: sum, average, min, max, product, adasum (float dtypes, a power-of-two "
                 "number of ranks)");
  app.add_option("-w,--warmup_iters", o.warmup, "Untimed runs before each measurement")
      ->check(CLI::Range(0, 1000000));
  app.add_option("-n,--iters", o.iterations, "Timed runs per measurement")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-c,--check", check, "Check results (1) or not (0)");
  app.add_option("--placement", placement,
                 "Which runs to time: both, out (out of place only) or in (in place only)");
  app.add_option("--json", json, "Also write the rows to this JSON file (rank 0)");
  bool engine = false;
  hvd::bench::EngineBenchOptions eo;
  app.add_flag("--engine", engine,
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
  bool gpuMode = false;
  app.add_flag("--gpu", gpuMode,
               "Instead of a sweep, time GPU allreduces (-b to -e, -f, -w, -n): NCCL against a "
               "device copy and the fusion copy kernel (one rank), the engine on GPU against host "
               "buffers (any ranks); CUDA builds only");
  bool startup = false, startupFirst = false;
  app.add_flag("--startup", startup,
               "Instead of a sweep, initialise as hvd_init does, pass a barrier, and print "
               "'HVD_INITIALISED <unix time ns>' (for bench/startup_time.py)");
  app.add_flag("--startup-first", startupFirst,
               "As --startup, then shut that runtime down and run the sweep: one launch gives "
               "both the launch time and the sweep (for bench/fake_hosts.py)");
  int simulate = 0;
  hvd::bench::SimBenchOptions so;
  std::string modelFile, algorithms;
  double nicGbps = 0, nicLatencyUs = -1;
  app.add_option("--simulate", simulate,
                 "Instead of a sweep, simulate an allreduce (or -o broadcast) on this many ranks "
                 "(virtual time, one "
                 "process; no hvdrun): every algorithm against the lower bound and the cost "
                 "model's choice, -b to -e by -f")
      ->check(CLI::Range(1, 65536));
  app.add_option("--model", modelFile,
                 "--simulate: the network model, JSON (fields: HVD_NETWORK_MODEL in "
                 "docs/environment.md); default: "
                 "100 Gb/s NICs and this class of machine within a host");
  app.add_option("--ranks-per-host", so.model.ranksPerHost,
                 "--simulate: the topology's ranks per host")
      ->check(CLI::Range(1, 65536));
  app.add_option("--hosts-per-switch", so.model.hostsPerSwitch,
                 "--simulate: hosts per switch (0: one switch)")
      ->check(CLI::Range(0, 65536));
  app.add_option("--nic-gbps", nicGbps, "--simulate: NIC bandwidth in Gbit/s")
      ->check(CLI::PositiveNumber);
  app.add_option("--nic-latency-us", nicLatencyUs, "--simulate: NIC latency in microseconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--algorithms", algorithms,
                 "--simulate: comma-separated, of recursive_doubling, ring, rabenseifner, "
                 "hierarchical (default: all that fit the topology)");
  bool negotiation = false;
  hvd::bench::NegotiationBenchOptions no;
  app.add_flag("--negotiation", negotiation,
               "Instead of a sweep, time rank 0's coordinator per cycle (decode every rank's "
               "requests, check, fuse, encode the responses) at 16 to 4,096 ranks; no hvdrun");
  app.add_option("--negotiation-tensors", no.tensors, "--negotiation: allreduces per cycle")
      ->check(CLI::Range(1, 100000));
  bool calibrateMode = false;
  std::string save;
  app.add_flag("--calibrate", calibrateMode,
               "Instead of a sweep, measure the link between 2 ranks (within a host, or between "
               "two) and the reduction speed, and print the network model; with --save, write it "
               "(merged into that file when it exists) for --simulate --model and the "
               "HVD_NETWORK_MODEL variable");
  app.add_option("--save", save, "--calibrate: the model file to write");
  CLI11_PARSE(app, argc, argv);
  try {
    o.minBytes = parseSize(minBytes, "-b");
    o.maxBytes = parseSize(maxBytes, "-e");
    o.stepBytes = parseSize(stepBytes, "-i");
    o.op = hvd::bench::parseCollective(op);
    o.dtype = hvd::collectives::parseDType(dtype);
    o.redop = hvd::collectives::parseReduceOp(redop);
    o.check = check != 0;
    o.placement = hvd::bench::parsePlacement(placement);
    if (startupFirst && (simulate > 0 || negotiation || calibrateMode || startup))
      throw hvd::InvalidArgument(
          "--startup-first goes before a sweep, --gpu or --engine; not with --simulate, "
          "--negotiation, --calibrate or --startup");
    if (simulate > 0) {
      if (!modelFile.empty()) {
        int perHost = so.model.ranksPerHost, perSwitch = so.model.hostsPerSwitch;
        so.model = hvd::collectives::NetworkModel::fromFile(modelFile, "--model " + modelFile);
        if (app.count("--ranks-per-host")) so.model.ranksPerHost = perHost;
        if (app.count("--hosts-per-switch")) so.model.hostsPerSwitch = perSwitch;
      }
      if (nicGbps > 0) so.model.interHost.bytesPerSecond = nicGbps * 1e9 / 8;
      if (nicLatencyUs >= 0) so.model.interHost.latencySeconds = nicLatencyUs * 1e-6;
      so.model.validate("--simulate");
      so.ranks = simulate;
      so.op = op;
      if (app.count("--minbytes")) so.minBytes = o.minBytes;
      if (app.count("--maxbytes")) so.maxBytes = o.maxBytes;
      if (app.count("--stepfactor")) so.stepFactor = o.stepFactor;
      std::stringstream list(algorithms);
      for (std::string name; std::getline(list, name, ',');) so.algorithms.push_back(name);
      auto result = hvd::bench::runSimBench(so);
      hvd::bench::printSimReport(std::cout, result);
      if (!json.empty()) hvd::bench::writeSimJson(json, result);
      return 0;
    }
    if (negotiation) {
      auto result = hvd::bench::runNegotiationBench(no);
      hvd::bench::printNegotiationReport(std::cout, result);
      if (!json.empty()) hvd::bench::writeNegotiationJson(json, result);
      return 0;
    }
    auto config = hvd::runtime::Config::fromEnvironment();
    if (calibrateMode) {
      hvd::collectives::NetworkModel base;
      // Merged into the file when it exists: calibrating one link keeps the other's figures.
      if (!save.empty() && std::filesystem::exists(save))
        base = hvd::collectives::NetworkModel::fromFile(save, "--save " + save);
      config.allreduceAlgorithm = hvd::collectives::AllreduceAlgorithm::RecursiveDoubling;
      auto rt = hvd::runtime::DirectCollectives::create(config);
      auto c = hvd::bench::calibrate(*rt, base, config.transport == hvd::runtime::Transport::Tcp);
      if (rt->topology().rank == 0) {
        hvd::bench::printCalibration(std::cout, c);
        if (!save.empty()) {
          std::ofstream out(save);
          if (!out) throw hvd::InvalidArgument("--save: cannot write " + save);
          out << c.model.toJson() << "\n";
        }
      }
      rt->barrier();
      return 0;
    }
    if (startup || startupFirst) stampInitialised(config);
    if (startup) return 0;
    if (gpuMode) {
#ifdef HVD_BENCH_GPU
      hvd::bench::GpuBenchOptions g;
      if (app.count("--minbytes")) g.minBytes = o.minBytes;
      if (app.count("--maxbytes")) g.maxBytes = o.maxBytes;
      if (app.count("--stepfactor")) g.stepFactor = o.stepFactor;
      g.warmup = o.warmup;
      g.iterations = o.iterations;
      auto result = hvd::bench::runGpuBench(config, g);
      if (config.topology.rank == 0) {
        hvd::bench::printGpuReport(std::cout, result);
        if (!json.empty()) hvd::bench::writeGpuJson(json, result);
      }
      return 0;
#else
      throw hvd::InvalidArgument("--gpu: this build of hvd has no GPU support");
#endif
    }
    if (engine) {
      auto result = hvd::bench::runEngineBench(config, eo);
      if (config.topology.rank == 0) {
        hvd::bench::printEngineReport(std::cout, result);
        if (!json.empty()) hvd::bench::writeEngineJson(json, result);
      }
      return 0;
    }
    auto rt = hvd::runtime::DirectCollectives::create(config);
    auto rows = hvd::bench::runSweep(*rt, o);
    if (rt->topology().rank == 0) {
      hvd::bench::printTable(std::cout, o, rt->topology().size, rows);
      if (!json.empty())
        hvd::bench::writeJson(
            json, o, rt->topology().size, rows,
            {{"transport", hvd::runtime::transportName(config.transport)},
             {"hierarchical_allreduce", config.hierarchicalAllreduce ? "on" : "off"},
             {"hierarchical_allgather", config.hierarchicalAllgather ? "on" : "off"}});
    }
    rt->barrier();
    for (const auto& r : rows)
      if (r.outOfPlace.wrong > 0 || r.inPlace.wrong > 0) return 1;
    return 0;
  } catch (const hvd::InvalidArgument& e) {
    std::fprintf(stderr, "hvd-bench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-bench: %s\n", e.what());
    return 1;
  }
}
