#include "bench/hvd_bench/negotiation_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "runtime/config.h"
#include "runtime/engine/coordinator.h"
#include "runtime/engine/messages.h"

namespace hvd::bench {
namespace {

using runtime::Coordinator;
using runtime::CoordinatorOptions;
using runtime::OpRequest;
using runtime::RequestList;
using runtime::ResponseList;
using Clock = std::chrono::steady_clock;

std::vector<OpRequest> gradients(int count) {
  std::vector<OpRequest> out;
  for (int i = 0; i < count; ++i) {
    OpRequest r;
    r.type = runtime::OpType::Allreduce;
    r.reduceOp = collectives::ReduceOp::Average;
    r.name = "DistributedOptimizer.Allreduce.layer" + std::to_string(i) + ".weight.grad";
    r.tensors = {{collectives::DType::Float32, {256, 64 + i % 7}}};
    out.push_back(std::move(r));
  }
  return out;
}

// One cycle: every rank's list decoded and submitted, the responses dispatched and encoded.
// Returns the encoded ResponseList.
std::string cycle(Coordinator& c, int ranks, const std::string& encodedRequest,
                  Clock::time_point now) {
  for (int r = 0; r < ranks; ++r) c.submitList(r, RequestList::decode(encodedRequest), now);
  return c.dispatch(now).encode();
}

NegotiationRow measure(int ranks, const NegotiationBenchOptions& o) {
  CoordinatorOptions co = runtime::defaultEngineOptions().coordinator;
  co.size = ranks;
  co.fusionThresholdBytes = 64u << 20;
  co.cacheCapacity = 1024;
  co.stallWarning = std::chrono::seconds(60);
  Coordinator c(co);
  auto requests = gradients(o.tensors);
  RequestList full;
  for (const auto& r : requests) full.submissions.push_back({0, r, {}});
  NegotiationRow row;
  row.ranks = ranks;
  std::string fullBytes = full.encode();
  row.firstRequestBytes = fullBytes.size();
  auto t0 = Clock::now();
  ResponseList first = ResponseList::decode(cycle(c, ranks, fullBytes, t0));
  row.firstCycleUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  // The cache ids every rank now sends instead of the requests.
  RequestList cached;
  cached.responseListsSeen = 1;
  for (const auto& response : first.responses)
    for (uint64_t id : response.cacheIds) {
      HVD_ENFORCE(id != 0, "negotiation: the response cache gave no id");
      cached.submissions.push_back({id, {}, {}});
    }
  HVD_ENFORCE(static_cast<int>(cached.submissions.size()) == o.tensors,
              "negotiation: ", cached.submissions.size(), " of ", o.tensors,
              " operations came back from the first cycle");
  std::string cachedBytes = cached.encode();
  row.cachedRequestBytes = cachedBytes.size();
  std::vector<double> times;
  for (int k = 0; k < o.cycles; ++k) {
    auto start = Clock::now();
    std::string response = cycle(c, ranks, cachedBytes, start);
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    row.responseBytes = response.size();
    cached.responseListsSeen++;
    cachedBytes = cached.encode();
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  row.cachedCycleUs = times[times.size() / 2];
  row.cachedNsPerRankTensor = row.cachedCycleUs * 1000 / (static_cast<double>(ranks) * o.tensors);
  return row;
}

}  // namespace

NegotiationBenchResult runNegotiationBench(const NegotiationBenchOptions& o) {
  HVD_ENFORCE(o.tensors >= 1 && o.cycles >= 1, "negotiation: tensors and cycles must be >= 1");
  NegotiationBenchResult result{o, {}};
  for (int n : o.ranks) result.rows.push_back(measure(n, o));
  return result;
}

void printNegotiationReport(std::ostream& out, const NegotiationBenchResult& r) {
  out << "# hvd-bench negotiation: rank 0's coordinator, " << r.options.tensors
      << " allreduces per cycle, fused; median of " << r.options.cycles << " cached cycles\n";
  out << "#  ranks  first cycle (us)  cached cycle (us)  ns per rank and tensor  request bytes "
         "(first/cached)  response bytes\n";
  for (const auto& row : r.rows) {
    char line[200];
    std::snprintf(line, sizeof line, "%8d %17.1f %18.1f %23.1f %14zu / %-8zu %15zu\n", row.ranks,
                  row.firstCycleUs, row.cachedCycleUs, row.cachedNsPerRankTensor,
                  row.firstRequestBytes, row.cachedRequestBytes, row.responseBytes);
    out << line;
  }
}

void writeNegotiationJson(const std::string& path, const NegotiationBenchResult& r) {
  nlohmann::json j;
  j["benchmark"] = "negotiation";
  j["tensors"] = r.options.tensors;
  j["cycles"] = r.options.cycles;
  for (const auto& row : r.rows)
    j["rows"].push_back({{"ranks", row.ranks},
                         {"first_cycle_us", row.firstCycleUs},
                         {"cached_cycle_us", row.cachedCycleUs},
                         {"cached_ns_per_rank_tensor", row.cachedNsPerRankTensor},
                         {"first_request_bytes", row.firstRequestBytes},
                         {"cached_request_bytes", row.cachedRequestBytes},
                         {"response_bytes", row.responseBytes}});
  std::ofstream out(path);
  if (!out) throw InvalidArgument("--json: cannot write " + path);
  out << j.dump(1) << "\n";
}

}  // namespace hvd::bench
