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
  std::string tables;
  for (const auto& t : measuredAllreduce)
    tables += detail::concat(
        tables.empty() ? "; allreduce measured over " : ", ", t.link, " on ", t.ranks, " ranks",
        t.withinOneHost() ? std::string() : detail::concat(" (", t.ranksPerHost, " per host)"));
  return detail::concat(
      ranksPerHost, " ranks per host", switches, "; NIC ", micros(interHost.latencySeconds), " ",
      rate(interHost.bytesPerSecond), copies, "; shm ", micros(intraHost.latencySeconds), " ",
      rate(intraHost.bytesPerSecond), " (host ", rate(hostMemoryBytesPerSecond),
      "); same host over TCP ", micros(sameHostTcp.latencySeconds), " ",
      rate(sameHostTcp.bytesPerSecond), "; reduce ", rate(reduceBytesPerSecond), tables);
}

std::string NetworkModel::toJson() const {
  nlohmann::ordered_json j;
  NetworkModel copy = *this;
  for (const auto& f : fields()) j[f.name] = f.at(copy);
  j["ranks_per_host"] = ranksPerHost;
  j["hosts_per_switch"] = hostsPerSwitch;
  for (const auto& t : measuredAllreduce) {
    nlohmann::ordered_json table;
    table["link"] = t.link;
    table["ranks"] = t.ranks;
    table["ranks_per_host"] = t.ranksPerHost;
    table["bytes"] = t.bytes;
    table["seconds"] = t.seconds;
    j["measured_allreduce"].push_back(table);
  }
  return j.dump(2);
}

const MeasuredAllreduce* NetworkModel::measured(const std::string& link, int ranks,
                                                int ranksPerHost) const {
  ranksPerHost = std::min(ranksPerHost, ranks);
  for (const auto& t : measuredAllreduce)
    if (t.ranks == ranks && t.ranksPerHost == ranksPerHost && t.link == link) return &t;
  return nullptr;
}

namespace {

constexpr TimedAlgorithm kTimed[] = {TimedAlgorithm::RecursiveDoubling, TimedAlgorithm::Ring,
                                     TimedAlgorithm::Rabenseifner};

TimedAlgorithm timedAlgorithm(const std::string& name, const std::string& link) {
  std::string valid;
  for (TimedAlgorithm a : kTimed) {
    if (name == timedAlgorithmName(a)) return a;
    valid += (valid.empty() ? "" : ", ") + std::string(timedAlgorithmName(a));
  }
  throw InvalidArgument(detail::concat("measured allreduce over ", link,
                                       ": unknown allreduce algorithm '", name, "' (a table times ",
                                       valid, ")"));
}

// The algorithm with the least time at `at`, interpolated (log-log) in the interval lo..hi.
TimedAlgorithm fastestIn(const MeasuredAllreduce& t, std::size_t lo, std::size_t hi, double at) {
  double f = lo == hi ? 0 : std::log(at / t.bytes[lo]) / std::log(t.bytes[hi] / t.bytes[lo]);
  const std::string* best = nullptr;
  double bestLog = 0;
  for (const auto& [name, times] : t.seconds) {
    double logTime = std::log(times[lo]) + f * (std::log(times[hi]) - std::log(times[lo]));
    if (!best || logTime < bestLog) {
      best = &name;
      bestLog = logTime;
    }
  }
  return timedAlgorithm(*best, t.link);
}

}  // namespace

const char* timedAlgorithmName(TimedAlgorithm algorithm) {
  switch (algorithm) {
    case TimedAlgorithm::RecursiveDoubling:
      return "recursive_doubling";
    case TimedAlgorithm::Ring:
      return "ring";
    case TimedAlgorithm::Rabenseifner:
      return "rabenseifner";
  }
  return "?";
}

void MeasuredAllreduce::derivePicks() {
  constexpr int kSteps = 64;
  for (const auto& entry : seconds) timedAlgorithm(entry.first, link);
  pickFrom.clear();
  pick.clear();
  auto add = [&](double from, TimedAlgorithm a) {
    if (pick.empty() || pick.back() != a) {
      pickFrom.push_back(from);
      pick.push_back(a);
    }
  };
  add(bytes.front(), fastestIn(*this, 0, 0, bytes.front()));
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i)
    for (int k = 1; k <= kSteps; ++k) {
      double at = bytes[i] * std::pow(bytes[i + 1] / bytes[i], static_cast<double>(k) / kSteps);
      add(at, fastestIn(*this, i, i + 1, at));
    }
}

TimedAlgorithm MeasuredAllreduce::fastestAt(double at) const {
  HVD_ENFORCE(!pick.empty(), "measured allreduce over ", link,
              ": tables are added by NetworkModel::setMeasured");
  auto next = std::upper_bound(pickFrom.begin(), pickFrom.end(), at);
  return pick[next == pickFrom.begin() ? 0 : next - pickFrom.begin() - 1];
}

void NetworkModel::setMeasured(MeasuredAllreduce table) {
  table.derivePicks();
  if (table.withinOneHost()) table.ranksPerHost = table.ranks;
  for (auto& t : measuredAllreduce)
    if (t.link == table.link && t.ranks == table.ranks && t.ranksPerHost == table.ranksPerHost) {
      t = std::move(table);
      return;
    }
  measuredAllreduce.push_back(std::move(table));
}

namespace {

MeasuredAllreduce measuredFromJson(const nlohmann::json& j, const std::string& where) {
  auto fail = [&](const std::string& what) { throw InvalidArgument(where + ": " + what); };
  if (!j.is_object()) fail("a table is an object {link, ranks, ranks_per_host, bytes, seconds}");
  MeasuredAllreduce t;
  for (const auto& item : j.items()) {
    const auto& v = item.value();
    if (item.key() == "link" && v.is_string()) {
      t.link = v.get<std::string>();
    } else if (item.key() == "ranks" && v.is_number_integer()) {
      t.ranks = v.get<int>();
    } else if (item.key() == "ranks_per_host" && v.is_number_integer()) {
      t.ranksPerHost = v.get<int>();
      if (t.ranksPerHost < 1) fail("ranks_per_host must be >= 1");
    } else if (item.key() == "bytes" && v.is_array()) {
      for (const auto& b : v) {
        if (!b.is_number() || b.get<double>() <= 0) fail("bytes must be numbers > 0");
        t.bytes.push_back(b.get<double>());
      }
    } else if (item.key() == "seconds" && v.is_object()) {
      for (const auto& algorithm : v.items()) {
        auto& times = t.seconds[algorithm.key()];
        if (!algorithm.value().is_array()) fail("seconds." + algorithm.key() + " must be a list");
        for (const auto& s : algorithm.value()) {
          if (!s.is_number() || !(s.get<double>() > 0))
            fail("seconds." + algorithm.key() + " must hold numbers > 0");
          times.push_back(s.get<double>());
        }
      }
    } else {
      fail(detail::concat("unknown or mistyped field ", item.key(), ": ", v.dump()));
    }
  }
  if (t.link.empty()) fail("link is missing");
  if (t.ranks < 2) fail("ranks must be >= 2");
  if (t.ranksPerHost > t.ranks || (t.ranksPerHost > 0 && t.ranks % t.ranksPerHost != 0))
    fail(detail::concat("ranks_per_host ", t.ranksPerHost, " does not divide ranks ", t.ranks));
  if (t.bytes.empty() || !std::is_sorted(t.bytes.begin(), t.bytes.end()) ||
      std::adjacent_find(t.bytes.begin(), t.bytes.end()) != t.bytes.end())
    fail("bytes must be a non-empty ascending list");
  if (t.seconds.empty()) fail("seconds names no algorithm");
  for (const auto& [name, times] : t.seconds)
    if (times.size() != t.bytes.size())
      fail(detail::concat("seconds.", name, " has ", times.size(), " times for ", t.bytes.size(),
                          " sizes"));
  return t;
}

}  // namespace

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
    if (key == "measured_allreduce") {
      if (!value.is_array()) throw InvalidArgument(origin + ": measured_allreduce must be a list");
      for (std::size_t i = 0; i < value.size(); ++i) {
        std::string where = detail::concat(origin, ": measured_allreduce[", i, "]");
        try {
          m.setMeasured(measuredFromJson(value[i], where));
        } catch (const InvalidArgument& e) {
          std::string what = e.what();
          throw InvalidArgument(what.rfind(where, 0) == 0 ? what : where + ": " + what);
        }
      }
      continue;
    }
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
