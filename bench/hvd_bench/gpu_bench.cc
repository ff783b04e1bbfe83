#include "bench/hvd_bench/gpu_bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>

#include "bench/hvd_bench/engine_bench.h"
#include "collectives/gpu/gpu_backend.h"
#include "runtime/runtime.h"

namespace hvd::bench {
namespace {

namespace gpu = collectives::gpu;
using collectives::DType;
using collectives::Tensor;
using Clock = std::chrono::steady_clock;

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median device time of `work` (queued on `stream`), from events around each run.
template <typename F>
double timeOnDevice(cudaStream_t stream, int warmup, int iterations, F work) {
  cudaEvent_t start, stop;
  HVD_CUDA_CHECK(cudaEventCreate(&start), "bench event");
  HVD_CUDA_CHECK(cudaEventCreate(&stop), "bench event");
  std::vector<double> us;
  for (int i = 0; i < warmup + iterations; ++i) {
    HVD_CUDA_CHECK(cudaEventRecord(start, stream), "bench event");
    work();
    HVD_CUDA_CHECK(cudaEventRecord(stop, stream), "bench event");
    HVD_CUDA_CHECK(cudaEventSynchronize(stop), "bench event");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= warmup) us.push_back(1000.0 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return medianOf(us);
}

std::vector<std::size_t> sizesOf(const GpuBenchOptions& o) {
  std::vector<std::size_t> sizes;
  for (double b = static_cast<double>(o.minBytes); b <= static_cast<double>(o.maxBytes) + 0.5;
       b *= std::max(o.stepFactor, 1.01))
    sizes.push_back(static_cast<std::size_t>(b) / 4 * 4);
  return sizes;
}

// One rank alone: NCCL against the copy floor, and batched against separate copies.
void runLocal(const runtime::Config& config, const GpuBenchOptions& o, GpuBenchResult& result) {
  gpu::Stream stream(0);
  collectives::Comm self(0, 1, {nullptr}, config.opTimeout, nullptr);
  collectives::nccl::NcclCollectives nccl(self, 0, config.opTimeout, config.topology.hostname);
  for (auto& row : result.rows) {
    auto in = gpu::allocateOnDevice(0, row.bytes), out = gpu::allocateOnDevice(0, row.bytes);
    HVD_CUDA_CHECK(cudaMemset(in.get(), 1, row.bytes), "bench input");
    std::vector<int64_t> shape{static_cast<int64_t>(row.bytes / 4)};
    Tensor tin{in.get(), DType::Float32, shape}, tout{out.get(), DType::Float32, shape};
    row.ncclUs = timeOnDevice(stream.get(), o.warmup, o.iterations, [&] {
      nccl.allreduce(tin, tout, collectives::ReduceOp::Sum, {}, stream.get());
    });
    row.copyUs = timeOnDevice(stream.get(), o.warmup, o.iterations, [&] {
      HVD_CUDA_CHECK(
          cudaMemcpyAsync(out.get(), in.get(), row.bytes, cudaMemcpyDeviceToDevice, stream.get()),
          "bench copy");
    });
  }
  std::vector<std::size_t> sizes = smallTensorSizes();
  std::size_t total = 0;
  for (auto s : sizes) total += s;
  auto src = gpu::allocateOnDevice(0, total), dst = gpu::allocateOnDevice(0, total);
  std::vector<gpu::CopyJob> jobs;
  std::size_t offset = 0;
  for (auto s : sizes) {
    jobs.push_back({src.get() + offset, dst.get() + offset, s});
    offset += s;
  }
  result.batchTensors = jobs.size();
  result.batchedCopyUs =
      timeOnDevice(stream.get(), 20, 200, [&] { gpu::batchedCopy(jobs, stream.get()); });
  result.separateCopiesUs = timeOnDevice(stream.get(), 20, 200, [&] {
    for (const auto& j : jobs)
      HVD_CUDA_CHECK(cudaMemcpyAsync(j.dst, j.src, j.bytes, cudaMemcpyDeviceToDevice, stream.get()),
                     "bench copy");
  });
}

double engineMedianUs(runtime::Runtime& rt, void* data, std::size_t bytes, runtime::DeviceId device,
                      const GpuBenchOptions& o, const std::string& name) {
  std::vector<double> us;
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    runtime::Operation op;
    op.type = runtime::OpType::Allreduce;
    op.name = name;
    op.inputs = {{data, DType::Float32, {static_cast<int64_t>(bytes / 4)}}};
    op.device = device;
    auto t0 = Clock::now();
    rt.engine().enqueue(std::move(op))->wait(rt.config().handleWaitLimit());
    auto t1 = Clock::now();
    if (i >= o.warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return medianOf(us);
}

}  // namespace

GpuBenchResult runGpuBench(const runtime::Config& config, const GpuBenchOptions& o) {
  GpuBenchResult result;
  result.ranks = config.topology.size;
  int devices = 0;
  HVD_CUDA_CHECK(cudaGetDeviceCount(&devices), "hvd-bench gpu");
  cudaDeviceProp prop{};
  HVD_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0), "hvd-bench gpu");
  result.device = prop.name;
  result.versions = gpu::cudaVersionText() + ", " + collectives::nccl::ncclVersionText(true);
  result.gpuBackend =
      config.topology.localSize > devices || !config.engine.executor.gpuUseNccl ? "host-staged"
      : config.hierarchicalAllreduce && config.topology.crossSize > 1           ? "hierarchical"
                                                                                : "nccl";
  for (auto b : sizesOf(o)) result.rows.push_back({b});
  if (config.topology.size == 1) runLocal(config, o, result);
  auto rt = runtime::Runtime::create(config);
  int device = config.topology.localRank % std::max(devices, 1);
  for (auto& row : result.rows) {
    auto d = gpu::allocateOnDevice(device, row.bytes);
    HVD_CUDA_CHECK(cudaMemset(d.get(), 0, row.bytes), "bench input");
    std::vector<std::byte> h(row.bytes);
    row.engineGpuUs = engineMedianUs(*rt, d.get(), row.bytes, runtime::DeviceId{device}, o,
                                     "gpu." + std::to_string(row.bytes));
    row.engineHostUs = engineMedianUs(*rt, h.data(), row.bytes, runtime::DeviceId{}, o,
                                      "host." + std::to_string(row.bytes));
  }
  rt->shutdown();
  return result;
}

void printGpuReport(std::ostream& out, const GpuBenchResult& r) {
  out << "# hvd-bench gpu: " << r.ranks << " rank(s) on " << r.device << " (" << r.versions
      << "); engine GPU backend: " << r.gpuBackend << "\n";
  out << std::setw(12) << "bytes" << std::setw(12) << "nccl(us)" << std::setw(12) << "copy(us)"
      << std::setw(10) << "ratio" << std::setw(16) << "engine-gpu(us)" << std::setw(17)
      << "engine-host(us)" << std::setw(10) << "ratio"
      << "\n";
  out << std::fixed << std::setprecision(1);
  for (const auto& row : r.rows) {
    out << std::setw(12) << row.bytes << std::setw(12) << row.ncclUs << std::setw(12) << row.copyUs
        << std::setw(10) << std::setprecision(2) << (row.copyUs > 0 ? row.ncclUs / row.copyUs : 0)
        << std::setprecision(1) << std::setw(16) << row.engineGpuUs << std::setw(17)
        << row.engineHostUs << std::setw(10) << std::setprecision(2)
        << (row.engineHostUs > 0 ? row.engineGpuUs / row.engineHostUs : 0) << std::setprecision(1)
        << "\n";
  }
  if (r.batchTensors > 0)
    out << "# fusion copy of " << r.batchTensors << " small tensors: batched " << r.batchedCopyUs
        << " us, separate cudaMemcpyAsync " << r.separateCopiesUs << " us (" << std::setprecision(2)
        << r.separateCopiesUs / r.batchedCopyUs << "x)\n";
}

void writeGpuJson(const std::string& path, const GpuBenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows)
    rows.push_back({{"bytes", row.bytes},
                    {"nccl_us", row.ncclUs},
                    {"copy_us", row.copyUs},
                    {"engine_gpu_us", row.engineGpuUs},
                    {"engine_host_us", row.engineHostUs}});
  nlohmann::json j = {{"benchmark", "hvd-bench gpu"},
                      {"ranks", r.ranks},
                      {"device", r.device},
                      {"versions", r.versions},
                      {"gpu_backend", r.gpuBackend},
                      {"rows", rows},
                      {"batch_tensors", r.batchTensors},
                      {"batched_copy_us", r.batchedCopyUs},
                      {"separate_copies_us", r.separateCopiesUs}};
  std::ofstream(path) << j.dump(2) << "\n";
}

}  // namespace hvd::bench
