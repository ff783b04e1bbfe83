// Tensor fusion through the engine: fewer collectives for many small allreduces, and a fused
// buffer reduced in pieces on one host.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "engine_ops.h"
#include "run_runtimes.h"

using namespace hvd;
using namespace hvd::runtime;
using hvd::collectives::DType;
using hvd::collectives::ReduceOp;
using hvd::collectives::Tensor;
using hvd::test::allreduceOf;
using hvd::test::named;
using hvd::test::runRuntimes;

TEST_CASE("fusion packs small allreduces into fewer collectives and the cache hits after step 1") {
  const int n = 2, tensors = 20, steps = 3;
  auto run = [&](const std::string& threshold) {
    std::vector<EngineStats> stats(n);
    auto outcomes = runRuntimes(
        n,
        [&](Runtime& rt, int rank) -> std::string {
          std::vector<std::vector<float>> data(tensors, std::vector<float>(256));
          for (int step = 0; step < steps; ++step) {
            std::vector<Handle> handles;
            for (int i = 0; i < tensors; ++i) {
              std::fill(data[i].begin(), data[i].end(), static_cast<float>(rank + step));
              handles.push_back(rt.engine().enqueue(allreduceOf(named("g", i), data[i])));
            }
            for (auto& h : handles) h->wait(std::chrono::seconds(10));
            for (auto& d : data)
              if (d[0] != static_cast<float>(2 * step + 1))
                return "wrong sum " + std::to_string(d[0]);
          }
          stats[rank] = rt.engine().stats();
          return "";
        },
        {{"HVD_FUSION_THRESHOLD", threshold}, {"HVD_CYCLE_TIME", "5"}});
    for (const auto& o : outcomes) REQUIRE(o == "");
    return stats;
  };
  auto fused = run("67108864");
  auto unfused = run("0");
  for (int r = 0; r < n; ++r) {
    CHECK(unfused[r].collectives == tensors * steps);
    CHECK(unfused[r].fusedTensors == 0);
    // A 5 ms cycle lets all 20 tensors of a step arrive before the coordinator dispatches.
    CHECK(fused[r].collectives <= steps * 2);
    CHECK(fused[r].fusedTensors >= tensors * steps - steps * 2);
    CHECK(fused[r].cacheMisses == tensors);
    CHECK(fused[r].cacheHits == tensors * (steps - 1));
  }
}

TEST_CASE(
    "a fused allreduce larger than a piece: tensors cut across pieces, scales, out of "
    "place") {
  // On one host the executor reduces a fused buffer in pieces of size x 64 KiB (192 KiB for 3
  // ranks); across hosts in one go. These sizes put piece boundaries inside tensors, between
  // them and next to empty ones.
  const int n = 3;
  const std::vector<std::size_t> counts = {1, 30000, 50001, 0, 7, 49152, 40000, 12345, 0, 3};
  std::size_t total = 0;
  for (auto c : counts) total += c * sizeof(float);
  struct Setup {
    std::map<std::string, std::string> params;
    uint64_t collectives;
  };
  const uint64_t pieces = (total + n * 65536 - 1) / (n * 65536);
  REQUIRE(pieces >= 4);
  std::vector<Setup> setups = {
      {hvd::test::oneHost(n, "shm"), pieces}, {hvd::test::oneHost(n, "tcp"), pieces}, {{}, 1}};
  for (const auto& setup : setups) {
    INFO((setup.params.empty() ? "across hosts" : setup.params.at("HVD_TRANSPORT")));
    std::vector<EngineStats> stats(n);
    auto outcomes = runRuntimes(
        n,
        [&](Runtime& rt, int rank) -> std::string {
          std::vector<std::vector<float>> in(counts.size()), out(counts.size());
          Operation grouped;
          grouped.type = OpType::Allreduce;
          grouped.name = "pieces";
          grouped.reduceOp = ReduceOp::Average;
          grouped.prescale = 0.5;
          grouped.postscale = 2.0;
          for (std::size_t t = 0; t < counts.size(); ++t) {
            in[t].resize(counts[t]);
            out[t].assign(counts[t], -1.0f);
            for (std::size_t i = 0; i < counts[t]; ++i)
              in[t][i] = static_cast<float>(rank + (i + t) % 7);
            std::vector<int64_t> shape{static_cast<int64_t>(counts[t])};
            grouped.inputs.push_back(Tensor{in[t].data(), DType::Float32, shape});
            // Every other tensor out of place.
            float* output = t % 2 ? out[t].data() : in[t].data();
            grouped.outputs.push_back(Tensor{output, DType::Float32, shape});
          }
          auto before = rt.engine().stats();
          rt.run(grouped);
          auto after = rt.engine().stats();
          stats[rank].collectives = after.collectives - before.collectives;
          for (std::size_t t = 0; t < counts.size(); ++t) {
            const auto& got = t % 2 ? out[t] : in[t];
            for (std::size_t i = 0; i < counts[t]; ++i) {
              // 2 * (0.5 * sum over ranks of (r + k)) / 3 = 1 + k for 3 ranks.
              float want = static_cast<float>(1 + (i + t) % 7);
              if (got[i] != want)
                return "tensor " + std::to_string(t) + "[" + std::to_string(i) +
                       "] = " + std::to_string(got[i]) + ", want " + std::to_string(want);
            }
            if (t % 2 && counts[t] && in[t][0] != static_cast<float>(rank + t % 7))
              return "input of out-of-place tensor " + std::to_string(t) + " changed";
          }
          return "";
        },
        setup.params);
    for (const auto& o : outcomes) REQUIRE(o == "");
    for (int r = 0; r < n; ++r) CHECK(stats[r].collectives == setup.collectives);
  }
}
