#include "bench/hvd_bench/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <vector>

#include "collectives/algorithms/reduce.h"
#include "common/error.h"

namespace hvd::bench {
namespace {

using Clock = std::chrono::steady_clock;
using collectives::DType;
using collectives::ReduceOp;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of an in-place float32 sum allreduce of `count` elements, every rank timing
// its own calls after a barrier; the slowest rank's median is the result (a max allreduce).
double allreduceSeconds(runtime::BlockingCollectives& rt, std::size_t count, int iterations) {
  std::vector<float> data(count, 1.0f);
  collectives::Tensor t{data.data(), DType::Float32, {static_cast<int64_t>(count)}};
  for (int i = 0; i < 5; ++i) rt.allreduce(t, t, ReduceOp::Sum);
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    rt.barrier();
    auto start = Clock::now();
    rt.allreduce(t, t, ReduceOp::Sum);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  double mine = median(times);
  collectives::Tensor m{&mine, DType::Float64, {1}};
  rt.allreduce(m, m, ReduceOp::Max);
  return mine;
}

// This core's reduction speed: bytes of output per second of dst = a + b on 4 MiB of float32.
double reduceRate() {
  constexpr std::size_t kCount = 1 << 20;
  std::vector<float> a(kCount, 1.0f), b(kCount, 2.0f), dst(kCount);
  std::vector<double> times;
  for (int i = 0; i < 15; ++i) {
    auto start = Clock::now();
    collectives::reduce(dst.data(), a.data(), b.data(), kCount, DType::Float32, ReduceOp::Sum);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return kCount * 4.0 / median(times);
}

}  // namespace

Calibration calibrate(runtime::BlockingCollectives& rt, const collectives::NetworkModel& base,
                      bool overTcp) {
  const auto& topology = rt.topology();
  if (topology.size != 2)
    throw InvalidArgument(
        detail::concat("calibrate measures one link: run it on 2 ranks, not ", topology.size));
  Calibration c;
  c.sameHost = topology.localSize == 2;
  c.overTcp = c.sameHost && overTcp;
  constexpr std::size_t kLargeCount = 1 << 20;  // 4 MiB
  c.largeBytes = kLargeCount * 4.0;
  // One exchange: t(S) = latency + S / bandwidth + S / reduce rate. The reduction is timed
  // apart from the allreduces, so a slow spell during one of them can leave nothing for the
  // transfer: measure again, a few times, before giving up.
  double transfer = 0;
  for (int attempt = 1; attempt <= 3 && transfer <= 0; ++attempt) {
    c.reduceBytesPerSecond = reduceRate();
    // Both ranks must use the same figures for the fit.
    collectives::Tensor rate{&c.reduceBytesPerSecond, DType::Float64, {1}};
    rt.allreduce(rate, rate, ReduceOp::Max);
    c.smallSeconds = allreduceSeconds(rt, 1, 200);
    c.largeSeconds = allreduceSeconds(rt, kLargeCount, 30);
    transfer = c.largeSeconds - c.smallSeconds - c.largeBytes / c.reduceBytesPerSecond;
  }
  if (transfer <= 0)
    throw InternalError(detail::concat(
        "calibrate: a 4 MiB allreduce (", c.largeSeconds * 1e6,
        " us) took less than a 4-byte one plus the reduction alone, three times; the machine "
        "is too noisy to calibrate, run it again"));
  collectives::LinkModel link{c.smallSeconds, c.largeBytes / transfer};
  c.model = base;
  c.model.reduceBytesPerSecond = c.reduceBytesPerSecond;
  (c.overTcp ? c.model.sameHostTcp : c.sameHost ? c.model.intraHost : c.model.interHost) = link;
  if (c.sameHost && !c.overTcp)
    c.model.hostMemoryBytesPerSecond =
        std::max(c.model.hostMemoryBytesPerSecond, link.bytesPerSecond);
  return c;
}

collectives::MeasuredAllreduce measureAllreduce(const AlgorithmRuns& runs, const std::string& link,
                                                int ranks, int ranksPerHost, std::size_t largest) {
  constexpr int kRounds = 5;
  // Sparse where latency decides, by factors of 2 where the crossovers fall.
  std::vector<std::size_t> sizes = {4, 64, 1024, 4096};
  for (std::size_t bytes = 8192; bytes <= std::max<std::size_t>(largest, 8192); bytes *= 2)
    sizes.push_back(bytes);
  collectives::MeasuredAllreduce table;
  table.link = link;
  table.ranks = ranks;
  table.ranksPerHost = ranksPerHost;
  for (std::size_t bytes : sizes) {
    int iterations = bytes <= 64 * 1024         ? 100
                     : bytes <= 256 * 1024      ? 20
                     : bytes <= 2 * 1024 * 1024 ? 8
                                                : 4;
    std::vector<std::vector<double>> rounds(runs.size());
    for (int round = 0; round < kRounds; ++round)
      for (std::size_t a = 0; a < runs.size(); ++a)
        rounds[a].push_back(
            allreduceSeconds(*runs[a].second, std::max<std::size_t>(1, bytes / 4), iterations));
    table.bytes.push_back(static_cast<double>(bytes));
    for (std::size_t a = 0; a < runs.size(); ++a)
      table.seconds[collectives::allreduceAlgorithmName(runs[a].first)].push_back(
          median(rounds[a]));
  }
  return table;
}

void printMeasuredAllreduce(std::ostream& out, const collectives::MeasuredAllreduce& table) {
  out << "# allreduce over " << table.link << " on " << table.ranks << " ranks";
  if (!table.withinOneHost()) out << ", " << table.ranksPerHost << " per host";
  out << ", median us (* auto's pick):\n#     bytes";
  for (const auto& entry : table.seconds) {
    char name[32];
    std::snprintf(name, sizeof name, " %19s", entry.first.c_str());
    out << name;
  }
  out << "\n";
  for (std::size_t i = 0; i < table.bytes.size(); ++i) {
    char cell[64];
    std::snprintf(cell, sizeof cell, "# %9.0f", table.bytes[i]);
    out << cell;
    double best = 0;
    for (const auto& entry : table.seconds)
      if (best == 0 || entry.second[i] < best) best = entry.second[i];
    for (const auto& entry : table.seconds) {
      std::snprintf(cell, sizeof cell, " %18.1f%s", entry.second[i] * 1e6,
                    entry.second[i] == best ? "*" : " ");
      out << cell;
    }
    out << "\n";
  }
}

void printCalibration(std::ostream& out, const Calibration& c) {
  char line[256];
  std::snprintf(line, sizeof line,
                "# hvd-bench calibrate: the link %s: 4 B allreduce %.2f us, 4 MiB %.1f us; "
                "reduction %.2f GB/s\n",
                c.overTcp    ? "within a host over TCP"
                : c.sameHost ? "within a host"
                             : "between two hosts",
                c.smallSeconds * 1e6, c.largeSeconds * 1e6, c.reduceBytesPerSecond / 1e9);
  out << line << "# model: " << c.model.describe() << "\n";
}

void saveModel(const std::string& path, const collectives::NetworkModel& model) {
  std::filesystem::path file(path);
  std::error_code error;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), error);
  std::string partial = detail::concat(path, ".partial-", ::getpid());
  {
    std::ofstream out(partial);
    if (!out) throw InvalidArgument("calibrate: cannot write " + partial);
    out << model.toJson() << "\n";
    if (!out.flush()) throw InvalidArgument("calibrate: cannot write " + partial);
  }
  std::filesystem::rename(partial, path, error);
  if (error) {
    std::filesystem::remove(partial);
    throw InvalidArgument("calibrate: cannot replace " + path + ": " + error.message());
  }
}

}  // namespace hvd::bench
