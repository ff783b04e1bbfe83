// hvd-bench engine: the framework pattern through the runtime engine. Each step submits a
// list of gradient-like tensors asynchronously (named as a framework would, so steps after the
// first hit the response cache) and waits for all of them; the list is timed with fusion on
// and with fusion off in one run, and the latency of a lone 4-byte allreduce through the
// engine is measured next to the same allreduce called directly on the communicator.
// Fusion on and off run in alternating rounds (on/off, then off/on, ...), each on a fresh
// runtime, after an untimed warm-up round: on this machine whichever configuration ran first
// in a process measured up to 1.5x slower with identical settings, which the earlier fixed
// order (fusion on first) charged to fusion.
#pragma once

#include <string>
#include <vector>

#include "runtime/config.h"

namespace hvd::bench {

struct EngineBenchOptions {
  int warmupSteps = 3;
  int steps = 20;  // timed steps per list, configuration and round
  int rounds = 4;
  int latencyIterations = 2000;
};

struct ListResult {
  std::string list;
  std::size_t tensors = 0;
  std::size_t totalBytes = 0;
  double fusedStepMs = 0;  // medians over the timed steps of all rounds, rank 0's clock
  double unfusedStepMs = 0;
  std::vector<double> fusedStepMsPerRound, unfusedStepMsPerRound;  // each round's median
  double fusedCollectivesPerStep = 0;
  double unfusedCollectivesPerStep = 0;
};

struct EngineBenchResult {
  int ranks = 0;
  int rounds = 0;
  std::size_t fusionThresholdBytes = 0;
  std::vector<ListResult> lists;
  double engineLatencyUs = 0;  // median, 4-byte allreduce through the engine
  double engineLatencyP90Us = 0;
  double directLatencyUs = 0;  // median, the same allreduce straight on the communicator
  double cacheHitRate = 0;     // of the timed steps' submissions with fusion on
};

// The tensor sizes in bytes of a ResNet-50-like gradient list (bottleneck blocks of 1x1, 3x3
// and 1x1 convolutions with their batch-norm scale and shift), the first 100, each clamped to
// [4 KiB, 4 MiB].
std::vector<std::size_t> resnetLikeSizes();
// 100 small tensors (4 KiB to 64 KiB), where per-operation cost dominates.
std::vector<std::size_t> smallTensorSizes();

// Collective over every rank of the job described by `config`; creates and shuts down
// runtimes itself. The result is complete on rank 0.
EngineBenchResult runEngineBench(const runtime::Config& config, const EngineBenchOptions& options);
void printEngineReport(std::ostream& out, const EngineBenchResult& result);
void writeEngineJson(const std::string& path, const EngineBenchResult& result);

}  // namespace hvd::bench
