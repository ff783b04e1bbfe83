#include "collectives/transport/network_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace hvd::collectives {
namespace {

// Each field once: its JSON name and where it lives, for both directions.
struct Field {
  const char* name;
  std::function<double&(NetworkModel&)> at;
  bool integer = false;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields = {
      {"intra_host_latency_seconds",
       [](NetworkModel& m) -> double& { return m.intraHost.latencySeconds; }},
      {"intra_host_bytes_per_second",
       [](NetworkModel& m) -> double& { return m.intraHost.bytesPerSecond; }},
      {"same_host_tcp_latency_seconds",
       [](NetworkModel& m) -> double& { return m.sameHostTcp.latencySeconds; }},
      {"same_host_tcp_bytes_per_second",
       [](NetworkModel& m) -> double& { return m.sameHostTcp.bytesPerSecond; }},
      {"host_memory_bytes_per_second",
       [](NetworkModel& m) -> double& { return m.hostMemoryBytesPerSecond; }},
      {"inter_host_latency_seconds",
       [](NetworkModel& m) -> double& { return m.interHost.latencySeconds; }},
      {"inter_host_bytes_per_second",
       [](NetworkModel& m) -> double& { return m.interHost.bytesPerSecond; }},
      {"nic_memory_copies", [](NetworkModel& m) -> double& { return m.nicMemoryCopies; }},
      {"switch_hop_latency_seconds", [](NetworkModel& m) -> double& { return m.switchHopLatency; }},
      {"uplink_bytes_per_second",
       [](NetworkModel& m) -> double& { return m.uplinkBytesPerSecond; }},
      {"reduce_bytes_per_second",
       [](NetworkModel& m) -> double& { return m.reduceBytesPerSecond; }},
  };
  return kFields;
}

std::string rate(double bytesPerSecond) {
  return detail::concat(std::round(bytesPerSecond / 1e8) / 10, " GB/s");
}
std::string micros(double seconds) { return detail::concat(std::round(seconds * 1e7) / 10, " us"); }

}  // namespace

NetworkModel NetworkModel::sharingCores(int coresPerHost) const {
  NetworkModel m = *this;
  if (coresPerHost <= 0 || coresPerHost >= ranksPerHost) return m;
  double share = static_cast<double>(coresPerHost) / ranksPerHost;
  m.intraHost.bytesPerSecond *= share;
  m.sameHostTcp.bytesPerSecond *= share;
  m.reduceBytesPerSecond *= share;
  return m;
}

std::string NetworkModel::describe() const {
  std::string switches =
      hostsPerSwitch > 0 ? detail::concat(", ", hostsPerSwitch, " hosts per switch") : "";
  std::string copies = nicMemoryCopies > 0
                           ? detail::concat(", copied ", std::round(nicMemoryCopies * 100) / 100,
                                            "x through the receiving host's memory")
                           : std::string(", bypassing host memory");
  return detail::concat(ranksPerHost, " ranks per host", switches, "; NIC ",
                        micros(interHost.latencySeconds), " ", rate(interHost.bytesPerSecond),
                        copies, "; shm ", micros(intraHost.latencySeconds), " ",
                        rate(intraHost.bytesPerSecond), " (host ", rate(hostMemoryBytesPerSecond),
                        "); same host over TCP ", micros(sameHostTcp.latencySeconds), " ",
                        rate(sameHostTcp.bytesPerSecond), "; reduce ", rate(reduceBytesPerSecond));
}

std::string NetworkModel::toJson() const {
  nlohmann::ordered_json j;
  NetworkModel copy = *this;
  for (const auto& f : fields()) j[f.name] = f.at(copy);
  j["ranks_per_host"] = ranksPerHost;
  j["hosts_per_switch"] = hostsPerSwitch;
  return j.dump(2);
}

NetworkModel NetworkModel::fromJson(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(detail::concat(origin, ": not JSON: ", e.what()));
  }
  if (!j.is_object()) throw InvalidArgument(origin + ": a network model is a JSON object");
  NetworkModel m;
  for (const auto& item : j.items()) {
    const std::string key = item.key();
    const auto& value = item.value();
    if (!value.is_number())
      throw InvalidArgument(
          detail::concat(origin, ": ", key, " must be a number, not ", value.dump()));
    if (key == "ranks_per_host" || key == "hosts_per_switch") {
      if (!value.is_number_integer())
        throw InvalidArgument(detail::concat(origin, ": ", key, " must be an integer"));
      (key == "ranks_per_host" ? m.ranksPerHost : m.hostsPerSwitch) = value.get<int>();
      continue;
    }
    auto f = std::find_if(fields().begin(), fields().end(),
                          [&](const Field& field) { return key == field.name; });
    if (f == fields().end()) throw InvalidArgument(detail::concat(origin, ": unknown field ", key));
    f->at(m) = value.get<double>();
  }
  m.validate(origin);
  return m;
}

NetworkModel NetworkModel::fromFile(const std::string& path, const std::string& origin) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(origin + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  return fromJson(text.str(), origin);
}

void NetworkModel::validate(const std::string& origin) const {
  auto need = [&](bool ok, const char* what) {
    if (!ok) throw InvalidArgument(detail::concat(origin, ": ", what));
  };
  need(intraHost.latencySeconds >= 0 && sameHostTcp.latencySeconds >= 0 &&
           interHost.latencySeconds >= 0 && switchHopLatency >= 0,
       "latencies must be >= 0");
  need(intraHost.bytesPerSecond > 0 && sameHostTcp.bytesPerSecond > 0 &&
           interHost.bytesPerSecond > 0 && hostMemoryBytesPerSecond > 0 && reduceBytesPerSecond > 0,
       "bandwidths and the reduction rate must be > 0");
  need(nicMemoryCopies >= 0 && std::isfinite(nicMemoryCopies),
       "nic_memory_copies must be a finite number >= 0");
  need(uplinkBytesPerSecond >= 0, "uplink_bytes_per_second must be >= 0 (0: non-blocking)");
  need(ranksPerHost >= 1, "ranks_per_host must be >= 1");
  need(hostsPerSwitch >= 0, "hosts_per_switch must be >= 0 (0: one switch)");
}

}  // namespace hvd::collectives
