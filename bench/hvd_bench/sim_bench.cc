#include "bench/hvd_bench/sim_bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "collectives/algorithms/allreduce.h"
#include "collectives/algorithms/cost_model.h"
#include "collectives/transport/sim/sim_world.h"
#include "common/error.h"

namespace hvd::bench {
namespace {

using namespace hvd::collectives;

constexpr const char* kHierarchical = "hierarchical";

bool hierarchyFits(const SimBenchOptions& o) {
  int l = o.model.ranksPerHost;
  return l > 1 && o.ranks > l && o.ranks % l == 0;
}

// Simulated seconds of one in-place float32 sum allreduce of `bytes` on every rank of `world`.
// Timing only: every rank passes the same (never touched) buffer.
double simulate(sim::SimWorld& world, std::byte* buffer, std::size_t bytes,
                const AllreduceOptions& options) {
  std::size_t count = std::max<std::size_t>(1, bytes / 4);
  return world
      .run([&](Comm& comm) {
        allreduce(comm, buffer, buffer, count, DType::Float32, ReduceOp::Sum, options);
      })
      .seconds;
}

std::string us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", seconds * 1e6);
  return buf;
}

}  // namespace

SimBenchResult runSimBench(const SimBenchOptions& o) {
  auto wallStart = std::chrono::steady_clock::now();
  HVD_ENFORCE(o.ranks >= 1, "--simulate: ranks must be >= 1");
  SimBenchResult result{o, {}, 0};
  std::vector<std::string>& names = result.options.algorithms;
  if (names.empty()) {
    names = {"recursive_doubling", "ring", "rabenseifner"};
    if (hierarchyFits(o)) names.push_back(kHierarchical);
  }
  std::vector<AllreduceAlgorithm> flat;
  bool hierarchical = false;
  for (const auto& name : names) {
    if (name == kHierarchical) {
      if (!hierarchyFits(o))
        throw InvalidArgument(
            detail::concat("--algorithms hierarchical: needs whole hosts of several ranks, not ",
                           o.ranks, " ranks with ", o.model.ranksPerHost, " per host"));
      hierarchical = true;
      continue;
    }
    AllreduceAlgorithm a = parseAllreduceAlgorithm(name);
    if (a == AllreduceAlgorithm::Auto)
      throw InvalidArgument("--algorithms: auto is reported in every row (column 'chosen')");
    flat.push_back(a);
  }
  sim::SimOptions so;
  so.model = o.model;
  so.moveData = false;
  sim::SimWorld world(o.ranks, so);
  std::unique_ptr<sim::SimWorld> staged;
  if (hierarchical) {
    so.hierarchicalAllreduce = true;
    staged = std::make_unique<sim::SimWorld>(o.ranks, so);
  }
  auto buffer = std::make_unique_for_overwrite<std::byte[]>(o.maxBytes + 4);
  CommShape shape{o.ranks, o.model.ranksPerHost};
  for (std::size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    SimRow row;
    row.bytes = bytes;
    row.boundSeconds = allreduceLowerBound(bytes, shape, o.model);
    double best = INFINITY, bestPredicted = INFINITY;
    for (AllreduceAlgorithm a : flat) {
      AllreduceOptions options;
      options.algorithm = a;
      std::string name = allreduceAlgorithmName(a);
      double t = simulate(world, buffer.get(), bytes, options);
      double predicted = predictAllreduce(a, bytes, shape, o.model);
      row.simulatedSeconds[name] = t;
      row.predictedSeconds[name] = predicted;
      if (t < best) best = t, row.fastest = name;
      if (predicted < bestPredicted) bestPredicted = predicted, row.chosen = name;
    }
    if (staged) {
      // As the runtime runs it: the stage across hosts picks its algorithm by the model.
      AllreduceOptions options;
      options.model = &o.model;
      double t = simulate(*staged, buffer.get(), bytes, options);
      double predicted = predictHierarchicalAllreduce(bytes, shape, o.model);
      row.simulatedSeconds[kHierarchical] = t;
      row.predictedSeconds[kHierarchical] = predicted;
      if (t < best) best = t, row.fastest = kHierarchical;
      // Auto's choice includes the staged form, as runsHierarchicalAllreduce decides it.
      if (predicted < bestPredicted) bestPredicted = predicted, row.chosen = kHierarchical;
    }
    result.rows.push_back(std::move(row));
    std::size_t next = static_cast<std::size_t>(static_cast<double>(bytes) * o.stepFactor);
    if (next <= bytes) break;
    bytes = next;
  }
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  return result;
}

void printSimReport(std::ostream& out, const SimBenchResult& r) {
  const auto& o = r.options;
  out << "# hvd-bench --simulate: allreduce float32 sum, " << o.ranks << " ranks; "
      << o.model.describe() << "\n";
  out << "# simulated microseconds per algorithm; bound: the alpha-beta-gamma lower bound; "
         "chosen: the cost model's pick (auto), fastest: the simulator's\n";
  std::vector<std::string> columns;
  for (const auto& name : o.algorithms) columns.push_back(name);
  out << "#       size";
  for (const auto& c : columns) {
    char head[40];
    std::snprintf(head, sizeof head, " %20s", c.c_str());
    out << head;
  }
  out << "      bound  chosen/bound               chosen              fastest\n";
  int mismatches = 0;
  double worst = 0;
  for (const auto& row : r.rows) {
    char line[128];
    std::snprintf(line, sizeof line, "%12zu", row.bytes);
    out << line;
    for (const auto& c : columns) {
      auto it = row.simulatedSeconds.find(c);
      std::snprintf(line, sizeof line, " %20s",
                    it == row.simulatedSeconds.end() ? "N/A" : us(it->second).c_str());
      out << line;
    }
    double chosen = row.chosen.empty() ? NAN : row.simulatedSeconds.at(row.chosen);
    double ratio = chosen / row.boundSeconds;
    worst = std::max(worst, ratio);
    mismatches += row.chosen != row.fastest;
    std::snprintf(line, sizeof line, " %10s %13.2f %20s %20s\n", us(row.boundSeconds).c_str(),
                  ratio, row.chosen.c_str(), row.fastest.c_str());
    out << line;
  }
  char tail[160];
  std::snprintf(tail, sizeof tail,
                "# chosen within %.2fx of the bound; cost model's choice = fastest simulated in "
                "%zu of %zu sizes; %.1f s to simulate\n",
                worst, r.rows.size() - mismatches, r.rows.size(), r.wallSeconds);
  out << tail;
}

void writeSimJson(const std::string& path, const SimBenchResult& r) {
  nlohmann::ordered_json j;
  j["benchmark"] = "simulated allreduce";
  j["ranks"] = r.options.ranks;
  j["model"] = nlohmann::json::parse(r.options.model.toJson());
  j["wall_seconds"] = r.wallSeconds;
  auto& rows = j["rows"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::ordered_json jr;
    jr["bytes"] = row.bytes;
    for (const auto& [name, s] : row.simulatedSeconds) jr["simulated_us"][name] = s * 1e6;
    for (const auto& [name, s] : row.predictedSeconds) jr["predicted_us"][name] = s * 1e6;
    jr["bound_us"] = row.boundSeconds * 1e6;
    jr["chosen"] = row.chosen;
    jr["fastest"] = row.fastest;
    rows.push_back(jr);
  }
  std::ofstream file(path);
  if (!file) throw InvalidArgument("--json: cannot write " + path);
  file << j.dump(2) << "\n";
}

}  // namespace hvd::bench
