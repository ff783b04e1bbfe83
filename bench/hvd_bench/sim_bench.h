// hvd-bench simulate: the allreduce or broadcast algorithms run on the simulated transport
// (virtual time, timing only) for any number of ranks and topology, against the α-β-γ lower
// bound and the cost model's choice. One row per size: every algorithm's simulated time, the
// bound, the algorithm the cost model picks (what auto runs there) and the fastest simulated.
#pragma once

#include <cstddef>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "collectives/transport/network_model.h"

namespace hvd::bench {

struct SimBenchOptions {
  std::string op = "allreduce";  // or "broadcast" (from rank 0)
  int ranks = 16;
  collectives::NetworkModel model;  // its ranksPerHost is the topology
  std::size_t minBytes = 4;
  std::size_t maxBytes = 1 << 30;
  double stepFactor = 4;
  // Which to simulate. Allreduce: ring, recursive_doubling, rabenseifner, hierarchical;
  // broadcast: binomial_tree, pipelined_chain, scatter_allgather, hierarchical. Empty: all that fit
  // the topology (hierarchical needs whole hosts of several ranks).
  std::vector<std::string> algorithms;
};

struct SimRow {
  std::size_t bytes = 0;
  std::map<std::string, double> simulatedSeconds;  // by algorithm
  std::map<std::string, double> predictedSeconds;  // the cost model's, by algorithm
  double boundSeconds = 0;
  std::string chosen;   // the cost model's choice among the flat algorithms simulated
  std::string fastest;  // the least simulated time among the flat algorithms simulated
};

struct SimBenchResult {
  SimBenchOptions options;  // with the algorithms it simulated
  std::vector<SimRow> rows;
  double wallSeconds = 0;
};

// Throws InvalidArgument for an unknown op or algorithm, or a topology the hierarchical form
// cannot take (asked for explicitly).
SimBenchResult runSimBench(const SimBenchOptions& options);
void printSimReport(std::ostream& out, const SimBenchResult& result);
void writeSimJson(const std::string& path, const SimBenchResult& result);

}  // namespace hvd::bench
