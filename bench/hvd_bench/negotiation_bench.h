// hvd-bench negotiation: what rank 0's coordinator costs per cycle as the job grows. For each
// job size, every rank submits the same list of gradient-like allreduces, as a training step
// does: the RequestLists are encoded as the ranks send them, and the coordinator decodes each,
// submits it, dispatches the fused responses and encodes them, all timed. The first cycle
// carries full requests; the following ones only response-cache ids, as steps after the first
// do. No sockets and no other threads: this is the coordinator's own CPU time, which a job
// pays on rank 0 once per cycle.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace hvd::bench {

struct NegotiationBenchOptions {
  std::vector<int> ranks{16, 64, 256, 1024, 4096};
  int tensors = 100;  // allreduces per cycle (a ResNet-50 step has about 160)
  int cycles = 20;    // timed cached cycles per size
};

struct NegotiationRow {
  int ranks = 0;
  double firstCycleUs = 0;   // full requests: metadata, checks, cache inserts
  double cachedCycleUs = 0;  // median of the cached cycles
  double cachedNsPerRankTensor = 0;
  std::size_t firstRequestBytes = 0;  // one rank's RequestList on the wire
  std::size_t cachedRequestBytes = 0;
  std::size_t responseBytes = 0;  // the ResponseList every rank receives
};

struct NegotiationBenchResult {
  NegotiationBenchOptions options;
  std::vector<NegotiationRow> rows;
};

NegotiationBenchResult runNegotiationBench(const NegotiationBenchOptions& options);
void printNegotiationReport(std::ostream& out, const NegotiationBenchResult& result);
void writeNegotiationJson(const std::string& path, const NegotiationBenchResult& result);

}  // namespace hvd::bench
