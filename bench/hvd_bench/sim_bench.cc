#include "bench/hvd_bench/sim_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "collectives/algorithms/allreduce.h"
#include "collectives/algorithms/broadcast.h"
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

// One algorithm as the bench runs it: its simulated and its predicted seconds for a size.
struct Candidate {
  std::string name;
  std::function<double(std::size_t)> simulate;
  std::function<double(std::size_t)> predict;
};

// The pipeline segment of the transport the runtime would use across hosts (TCP: Comm's
// default), which the chain's prediction takes.
constexpr std::size_t kChainSegment = 512 * 1024;

std::string us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", seconds * 1e6);
  return buf;
}

struct Worlds {
  std::unique_ptr<sim::SimWorld> flat, staged;
  std::unique_ptr<std::byte[]> buffer;
};

// The world of the "hierarchical" column: `so` with the host hierarchy attached. Throws when
// the topology has no whole hosts of several ranks.
void makeStagedWorld(const SimBenchOptions& o, sim::SimOptions so, Worlds& w) {
  if (!hierarchyFits(o))
    throw InvalidArgument(
        detail::concat("--algorithms hierarchical: needs whole hosts of several ranks, not ",
                       o.ranks, " ranks with ", o.model.ranksPerHost, " per host"));
  so.model = o.model;
  so.moveData = false;
  w.staged = std::make_unique<sim::SimWorld>(o.ranks, so);
}

// Timing only: every rank passes the same (never touched) buffer.
double simulateAllreduce(sim::SimWorld& world, std::byte* buffer, std::size_t bytes,
                         const AllreduceOptions& options) {
  std::size_t count = std::max<std::size_t>(1, bytes / 4);
  return world
      .run([&](Comm& comm) {
        allreduce(comm, buffer, buffer, count, DType::Float32, ReduceOp::Sum, options);
      })
      .seconds;
}

std::vector<Candidate> allreduceCandidates(const SimBenchOptions& o,
                                           std::vector<std::string>& names, Worlds& w) {
  if (names.empty()) {
    names = {"recursive_doubling", "ring", "rabenseifner"};
    if (hierarchyFits(o)) names.push_back(kHierarchical);
  }
  CommShape shape{o.ranks, o.model.ranksPerHost};
  std::vector<Candidate> out;
  for (const auto& name : names) {
    if (name == kHierarchical) {
      makeStagedWorld(o, {.hierarchicalAllreduce = true}, w);
      // As the runtime runs it: the split and the stage across hosts picked by the model.
      out.push_back({name,
                     [&o, &w](std::size_t bytes) {
                       AllreduceOptions options;
                       options.model = &o.model;
                       return simulateAllreduce(*w.staged, w.buffer.get(), bytes, options);
                     },
                     [&o, shape](std::size_t bytes) {
                       return predictHierarchicalAllreduce(bytes, shape, o.model);
                     }});
      continue;
    }
    AllreduceAlgorithm a = parseAllreduceAlgorithm(name);
    if (a == AllreduceAlgorithm::Auto)
      throw InvalidArgument("--algorithms: auto is reported in every row (column 'chosen')");
    out.push_back(
        {name,
         [&w, a](std::size_t bytes) {
           AllreduceOptions options;
           options.algorithm = a;
           return simulateAllreduce(*w.flat, w.buffer.get(), bytes, options);
         },
         [&o, shape, a](std::size_t bytes) { return predictAllreduce(a, bytes, shape, o.model); }});
  }
  return out;
}

std::vector<Candidate> broadcastCandidates(const SimBenchOptions& o,
                                           std::vector<std::string>& names, Worlds& w) {
  constexpr BroadcastAlgorithm kAll[] = {BroadcastAlgorithm::BinomialTree,
                                         BroadcastAlgorithm::PipelinedChain,
                                         BroadcastAlgorithm::ScatterAllgather};
  if (names.empty()) {
    for (BroadcastAlgorithm a : kAll) names.push_back(broadcastAlgorithmName(a));
    if (hierarchyFits(o)) names.push_back(kHierarchical);
  }
  CommShape shape{o.ranks, o.model.ranksPerHost};
  std::vector<Candidate> out;
  for (const auto& name : names) {
    if (name == kHierarchical) {
      // The hierarchy a job of several hosts gets; byHost stages every size on it.
      makeStagedWorld(o, {.hierarchicalAllreduceByModel = true}, w);
      out.push_back(
          {name,
           [&o, &w](std::size_t bytes) {
             BroadcastOptions options;
             options.model = &o.model;
             options.byHost = true;
             options.maxSegmentBytes = kChainSegment;
             return w.staged
                 ->run([&](Comm& comm) { broadcast(comm, w.buffer.get(), bytes, 0, options); })
                 .seconds;
           },
           [&o, shape](std::size_t bytes) {
             return predictHierarchicalBroadcast(bytes, shape, o.model, kChainSegment,
                                                 BroadcastOptions{}.pipelineThresholdBytes);
           }});
      continue;
    }
    auto it = std::find_if(std::begin(kAll), std::end(kAll),
                           [&](BroadcastAlgorithm a) { return name == broadcastAlgorithmName(a); });
    if (it == std::end(kAll))
      throw InvalidArgument("--algorithms: unknown broadcast algorithm '" + name +
                            "' (use binomial_tree, pipelined_chain, scatter_allgather)");
    BroadcastAlgorithm a = *it;
    out.push_back(
        {name,
         [&w, a](std::size_t bytes) {
           BroadcastOptions options;
           options.algorithm = a;
           options.maxSegmentBytes = kChainSegment;
           return w.flat
               ->run([&](Comm& comm) { broadcast(comm, w.buffer.get(), bytes, 0, options); })
               .seconds;
         },
         [&o, shape, a](std::size_t bytes) {
           return predictBroadcast(a, bytes, shape, o.model, kChainSegment);
         }});
  }
  return out;
}

}  // namespace

SimBenchResult runSimBench(const SimBenchOptions& o) {
  auto wallStart = std::chrono::steady_clock::now();
  HVD_ENFORCE(o.ranks >= 1, "simulate: ranks must be >= 1");
  bool isBroadcast = o.op == "broadcast";
  if (!isBroadcast && o.op != "allreduce")
    throw InvalidArgument("simulate -o '" + o.op + "': simulates allreduce or broadcast");
  SimBenchResult result{o, {}, 0};
  Worlds worlds;
  worlds.flat = std::make_unique<sim::SimWorld>(
      o.ranks, sim::SimOptions{.model = o.model, .moveData = false});
  worlds.buffer = std::make_unique_for_overwrite<std::byte[]>(o.maxBytes + 4);
  std::vector<std::string>& names = result.options.algorithms;
  std::vector<Candidate> candidates =
      isBroadcast ? broadcastCandidates(o, names, worlds) : allreduceCandidates(o, names, worlds);
  CommShape shape{o.ranks, o.model.ranksPerHost};
  for (std::size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    SimRow row;
    row.bytes = bytes;
    row.boundSeconds = isBroadcast ? broadcastLowerBound(bytes, shape, o.model)
                                   : allreduceLowerBound(bytes, shape, o.model);
    double best = INFINITY, bestPredicted = INFINITY;
    for (const Candidate& c : candidates) {
      double t = c.simulate(bytes);
      double predicted = c.predict(bytes);
      row.simulatedSeconds[c.name] = t;
      row.predictedSeconds[c.name] = predicted;
      if (t < best) best = t, row.fastest = c.name;
      // Auto's choice: the least predicted (for allreduce including the staged form, as
      // runsHierarchicalAllreduce decides it).
      if (predicted < bestPredicted) bestPredicted = predicted, row.chosen = c.name;
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
  out << "# hvd-bench simulate: "
      << (o.op == "broadcast" ? "broadcast from rank 0" : "allreduce float32 sum") << ", "
      << o.ranks << " ranks; " << o.model.describe() << "\n";
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
  j["benchmark"] = "simulated " + r.options.op;
  j["op"] = r.options.op;
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
