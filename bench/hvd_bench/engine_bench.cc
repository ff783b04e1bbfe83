#include "bench/hvd_bench/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "runtime/direct_collectives.h"
#include "runtime/runtime.h"

namespace hvd::bench {
namespace {

using Clock = std::chrono::steady_clock;
using collectives::DType;
using collectives::Tensor;
using runtime::Operation;
using runtime::OpType;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<std::size_t>(p * (v.size() - 1))];
}

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct StepRun {
  std::vector<double> stepMs;
  double collectivesPerStep = 0;
  uint64_t hits = 0, submissions = 0;
};

StepRun runSteps(runtime::Runtime& rt, const std::vector<std::size_t>& sizes,
                 const std::string& prefix, const EngineBenchOptions& o) {
  std::vector<std::vector<float>> grads;
  for (auto bytes : sizes) grads.emplace_back(bytes / sizeof(float), 1.0f);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < sizes.size(); ++i) names.push_back(prefix + std::to_string(i));
  StepRun run;
  runtime::EngineStats before;
  for (int step = 0; step < o.warmupSteps + o.steps; ++step) {
    if (step == o.warmupSteps) {
      rt.barrier();
      before = rt.engine().stats();
    }
    auto t0 = Clock::now();
    std::vector<runtime::Handle> handles;
    // Backprop produces the last layer's gradient first.
    for (std::size_t k = grads.size(); k-- > 0;) {
      Operation op;
      op.type = OpType::Allreduce;
      op.name = names[k];
      op.reduceOp = collectives::ReduceOp::Average;
      op.inputs = {
          Tensor{grads[k].data(), DType::Float32, {static_cast<int64_t>(grads[k].size())}}};
      handles.push_back(rt.engine().enqueue(std::move(op)));
    }
    for (auto& h : handles) h->wait(rt.config().handleWaitLimit());
    if (step >= o.warmupSteps) run.stepMs.push_back(msSince(t0));
  }
  auto after = rt.engine().stats();
  run.collectivesPerStep = static_cast<double>(after.collectives - before.collectives) / o.steps;
  run.hits = after.cacheHits - before.cacheHits;
  run.submissions = after.submitted - before.submitted;
  return run;
}

std::vector<double> latencies(const std::function<void(float*)>& allreduce, int iterations) {
  std::vector<double> us;
  float x = 1.0f;
  for (int i = 0; i < iterations / 10; ++i) allreduce(&x);
  for (int i = 0; i < iterations; ++i) {
    auto t0 = Clock::now();
    allreduce(&x);
    us.push_back(msSince(t0) * 1000.0);
  }
  return us;
}

}  // namespace

std::vector<std::size_t> resnetLikeSizes() {
  const std::size_t kMin = 4 << 10, kMax = 4 << 20;
  std::vector<std::size_t> sizes;
  const int widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int s = 0; s < 4; ++s)
    for (int b = 0; b < blocks[s]; ++b) {
      std::size_t w = widths[s];
      for (std::size_t elements : {4 * w * w, w, w, w * w * 9, w, w, w * 4 * w, 4 * w, 4 * w})
        sizes.push_back(std::clamp(elements * 4, kMin, kMax));
    }
  sizes.resize(100);
  return sizes;
}

std::vector<std::size_t> smallTensorSizes() {
  std::vector<std::size_t> sizes;
  for (int i = 0; i < 100; ++i) sizes.push_back((4u << 10) << (i % 5));  // 4..64 KiB
  return sizes;
}

EngineBenchResult runEngineBench(const runtime::Config& config, const EngineBenchOptions& o) {
  EngineBenchResult result;
  result.ranks = config.topology.size;
  result.rounds = o.rounds;
  result.fusionThresholdBytes = config.engine.coordinator.fusionThresholdBytes;
  const std::vector<std::pair<std::string, std::vector<std::size_t>>> lists = {
      {"resnet-like", resnetLikeSizes()}, {"small", smallTensorSizes()}};
  for (const auto& [name, sizes] : lists) {
    ListResult r;
    r.list = name;
    r.tensors = sizes.size();
    for (auto b : sizes) r.totalBytes += b;
    result.lists.push_back(r);
  }
  {
    // An untimed round first: a process's first runtime ran its first steps slower (page
    // faults, allocator growth, socket buffers), whichever configuration it had.
    auto rt = runtime::Runtime::create(config);
    for (const auto& [name, sizes] : lists) runSteps(*rt, sizes, name + ".", o);
    rt->shutdown();
  }
  std::vector<std::vector<double>> fusedMs(lists.size()), unfusedMs(lists.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (bool fused : {round % 2 == 0, round % 2 != 0}) {
      runtime::Config c = config;
      if (!fused) c.engine.coordinator.fusionThresholdBytes = 0;
      auto rt = runtime::Runtime::create(c);
      for (std::size_t i = 0; i < lists.size(); ++i) {
        StepRun run = runSteps(*rt, lists[i].second, lists[i].first + ".", o);
        ListResult& r = result.lists[i];
        auto& all = fused ? fusedMs[i] : unfusedMs[i];
        all.insert(all.end(), run.stepMs.begin(), run.stepMs.end());
        (fused ? r.fusedStepMsPerRound : r.unfusedStepMsPerRound).push_back(median(run.stepMs));
        (fused ? r.fusedCollectivesPerStep : r.unfusedCollectivesPerStep) +=
            run.collectivesPerStep / o.rounds;
        if (fused && i == 0 && run.submissions > 0)
          result.cacheHitRate = static_cast<double>(run.hits) / run.submissions;
      }
      if (fused && round == 0) {
        auto us = latencies(
            [&](float* x) {
              Operation op;
              op.type = OpType::Allreduce;
              op.name = "latency";
              op.inputs = {Tensor{x, DType::Float32, {1}}};
              rt->run(std::move(op));
            },
            o.latencyIterations);
        result.engineLatencyUs = median(us);
        result.engineLatencyP90Us = percentile(us, 0.9);
      }
      rt->shutdown();
    }
  }
  for (std::size_t i = 0; i < lists.size(); ++i) {
    result.lists[i].fusedStepMs = median(fusedMs[i]);
    result.lists[i].unfusedStepMs = median(unfusedMs[i]);
  }
  auto direct = runtime::DirectCollectives::create(config);
  result.directLatencyUs = median(latencies(
      [&](float* x) {
        Tensor t{x, DType::Float32, {1}};
        direct->allreduce(t, t, collectives::ReduceOp::Sum);
      },
      o.latencyIterations));
  direct->barrier();
  return result;
}

void printEngineReport(std::ostream& out, const EngineBenchResult& r) {
  out << "# hvd-bench engine: " << r.ranks << " ranks, fusion threshold " << r.fusionThresholdBytes
      << " bytes, " << r.rounds
      << " rounds alternating fusion on and off (medians over all rounds' steps)\n";
  out << "#  list         tensors      bytes | fused ms/step  steps/s  colls | unfused ms/step"
         "  steps/s  colls | speed-up\n";
  for (const auto& l : r.lists) {
    out << std::fixed << std::setprecision(2) << std::setw(14) << l.list << std::setw(9)
        << l.tensors << std::setw(11) << l.totalBytes << " | " << std::setw(13) << l.fusedStepMs
        << std::setw(9) << 1000.0 / l.fusedStepMs << std::setw(7) << l.fusedCollectivesPerStep
        << " | " << std::setw(15) << l.unfusedStepMs << std::setw(9) << 1000.0 / l.unfusedStepMs
        << std::setw(7) << l.unfusedCollectivesPerStep << " | " << std::setw(7)
        << l.unfusedStepMs / l.fusedStepMs << "x\n";
  }
  out << "# 4-byte allreduce through the engine: median " << r.engineLatencyUs << " us (p90 "
      << r.engineLatencyP90Us << " us); directly on the communicator: " << r.directLatencyUs
      << " us\n# response cache hit rate in the timed steps: " << r.cacheHitRate * 100 << " %\n";
}

void writeEngineJson(const std::string& path, const EngineBenchResult& r) {
  nlohmann::json j = {{"tool", "hvd-bench engine"},
                      {"ranks", r.ranks},
                      {"rounds", r.rounds},
                      {"fusion_threshold_bytes", r.fusionThresholdBytes},
                      {"engine_latency_us_median", r.engineLatencyUs},
                      {"engine_latency_us_p90", r.engineLatencyP90Us},
                      {"direct_latency_us_median", r.directLatencyUs},
                      {"cache_hit_rate", r.cacheHitRate},
                      {"lists", nlohmann::json::array()}};
  for (const auto& l : r.lists)
    j["lists"].push_back({{"list", l.list},
                          {"tensors", l.tensors},
                          {"total_bytes", l.totalBytes},
                          {"fused_step_ms_median", l.fusedStepMs},
                          {"unfused_step_ms_median", l.unfusedStepMs},
                          {"fused_steps_per_s", 1000.0 / l.fusedStepMs},
                          {"unfused_steps_per_s", 1000.0 / l.unfusedStepMs},
                          {"fusion_speedup", l.unfusedStepMs / l.fusedStepMs},
                          {"fused_step_ms_per_round", l.fusedStepMsPerRound},
                          {"unfused_step_ms_per_round", l.unfusedStepMsPerRound},
                          {"fused_collectives_per_step", l.fusedCollectivesPerStep},
                          {"unfused_collectives_per_step", l.unfusedCollectivesPerStep}});
  std::ofstream file(path);
  if (!file) throw InvalidArgument("--json " + path + ": cannot open for writing");
  file << j.dump(2) << "\n";
}

}  // namespace hvd::bench
