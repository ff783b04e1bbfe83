// hvd-bench gpu: GPU tensors (CUDA builds only).
// - One rank: the NCCL allreduce itself (out of place, float32 sum, CUDA events around it)
//   against a device-to-device copy of the same size, the physical floor of a one-rank
//   allreduce; and the fusion buffer's batched copy of 100 small tensors against 100
//   cudaMemcpyAsync calls.
// - Any number of ranks: allreduce through the engine (enqueue and wait, wall clock) on GPU
//   buffers and on host buffers of the same size; with several ranks on one GPU the GPU one is
//   host-staged, so the pair shows what staging costs over the host algorithms.
// Medians of the timed runs. Collective over every rank of `config`'s job.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "runtime/config.h"

namespace hvd::bench {

struct GpuBenchOptions {
  std::size_t minBytes = 1 << 20;
  std::size_t maxBytes = std::size_t{1} << 30;
  double stepFactor = 4;
  int warmup = 5;
  int iterations = 20;
};

struct GpuRow {
  std::size_t bytes = 0;
  double ncclUs = 0;        // one rank only: ncclAllReduce, events
  double copyUs = 0;        // one rank only: cudaMemcpyAsync device to device, events
  double engineGpuUs = 0;   // through the engine, GPU buffers
  double engineHostUs = 0;  // through the engine, host buffers
};

struct GpuBenchResult {
  int ranks = 0;
  std::string device;      // "NVIDIA H100 80GB HBM3"
  std::string gpuBackend;  // what the engine used for GPU tensors: nccl or host-staged
  std::string versions;
  std::vector<GpuRow> rows;
  std::size_t batchTensors = 0;
  double batchedCopyUs = 0;  // one rank only
  double separateCopiesUs = 0;
};

GpuBenchResult runGpuBench(const runtime::Config& config, const GpuBenchOptions& options);
void printGpuReport(std::ostream& out, const GpuBenchResult& result);
void writeGpuJson(const std::string& path, const GpuBenchResult& result);

}  // namespace hvd::bench
