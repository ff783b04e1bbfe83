#include "bench/hvd_bench/report.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "common/error.h"

namespace hvd::bench {
namespace {

std::string cell(const Timing& t) {
  char buf[96];
  if (!t.measured) return "        N/A        N/A        N/A    N/A";
  std::snprintf(buf, sizeof buf, " %10.2f %10.3f %10.3f %6s", t.timeUs, t.algBw, t.busBw,
                t.wrong < 0 ? "N/A" : std::to_string(t.wrong).c_str());
  return buf;
}

nlohmann::json timingJson(const Timing& t) {
  if (!t.measured) return nullptr;
  return {
      {"time_us", t.timeUs}, {"algbw_gbps", t.algBw}, {"busbw_gbps", t.busBw}, {"wrong", t.wrong}};
}

}  // namespace

double averageBusBandwidth(const std::vector<Row>& rows) {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows)
    for (const Timing* t : {&r.outOfPlace, &r.inPlace})
      if (t->measured) {
        sum += t->busBw;
        ++n;
      }
  return n ? sum / n : 0;
}

void printTable(std::ostream& out, const BenchOptions& o, int ranks, const std::vector<Row>& rows) {
  char line[256];
  out << "# hvd-bench: " << collectiveName(o.op) << ", " << ranks << " ranks, "
      << collectives::dtypeName(o.dtype) << ", warmup " << o.warmup << ", iterations "
      << o.iterations << "\n";
  out << "#                                                 out-of-place                        "
         "in-place\n";
  out << "#       size      count     type   redop  root |    time(us)  algbw(GB/s) busbw(GB/s) "
         "#wrong |   time(us) algbw(GB/s) busbw(GB/s) #wrong\n";
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%12zu %10zu %8s %7s %5d |", r.bytes, r.count,
                  collectives::dtypeName(o.dtype), collectives::reduceOpName(o.redop), o.root);
    out << line << cell(r.outOfPlace) << " |" << cell(r.inPlace) << "\n";
  }
  long wrong = 0;
  for (const auto& r : rows)
    wrong += std::max(0L, r.outOfPlace.wrong) + std::max(0L, r.inPlace.wrong);
  std::snprintf(line, sizeof line,
                "# Out of bounds values : %ld %s\n# Avg bus bandwidth    : %.3f GB/s\n", wrong,
                wrong ? "FAILED" : "OK", averageBusBandwidth(rows));
  out << line;
}

void writeJson(const std::string& path, const BenchOptions& o, int ranks,
               const std::vector<Row>& rows, const std::map<std::string, std::string>& settings) {
  nlohmann::json j = {{"tool", "hvd-bench"},
                      {"op", collectiveName(o.op)},
                      {"dtype", collectives::dtypeName(o.dtype)},
                      {"redop", collectives::reduceOpName(o.redop)},
                      {"ranks", ranks},
                      {"warmup", o.warmup},
                      {"iterations", o.iterations},
                      {"avg_busbw_gbps", averageBusBandwidth(rows)},
                      {"settings", settings},
                      {"rows", nlohmann::json::array()}};
  for (const auto& r : rows)
    j["rows"].push_back({{"size", r.bytes},
                         {"count", r.count},
                         {"root", o.root},
                         {"out_of_place", timingJson(r.outOfPlace)},
                         {"in_place", timingJson(r.inPlace)}});
  std::ofstream file(path);
  if (!file) throw InvalidArgument("--json " + path + ": cannot open for writing");
  file << j.dump(2) << "\n";
}

}  // namespace hvd::bench
