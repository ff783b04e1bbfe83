#include "collectives/rendezvous/failure_reports.h"

#include <nlohmann/json.hpp>

namespace hvd::rendezvous {
namespace {

std::string prefix(const std::string& jobId) { return "job/" + jobId + "/failure/"; }

}  // namespace

void postFailureReport(Store& store, const std::string& jobId, const FailureReport& report) {
  nlohmann::json j{{"rank", report.rank},
                   {"cause", report.causedByPeer ? "peer" : "own"},
                   {"message", report.message}};
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  int64_t n = store.add(prefix(jobId) + "count", 1);
  store.set(prefix(jobId) + std::to_string(n), Bytes(text.begin(), text.end()));
}

std::vector<FailureReport> readFailureReports(Store& store, const std::string& jobId) {
  int64_t count = store.add(prefix(jobId) + "count", 0);
  std::vector<std::string> keys;
  for (int64_t n = 1; n <= count; ++n) keys.push_back(prefix(jobId) + std::to_string(n));
  std::vector<FailureReport> reports;
  for (const auto& value : store.multiGet(keys)) {
    if (!value) continue;  // counted, not yet written: its rank died in between
    auto j = nlohmann::json::parse(value->begin(), value->end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    FailureReport report;
    report.rank = j.value("rank", -1);
    report.causedByPeer = j.value("cause", "") == "peer";
    report.message = j.value("message", "");
    reports.push_back(std::move(report));
  }
  return reports;
}

int firstOwnFailure(const std::vector<FailureReport>& reports) {
  for (const auto& report : reports)
    if (!report.causedByPeer) return report.rank;
  return -1;
}

}  // namespace hvd::rendezvous
