#include "launcher/host_blacklist.h"

#include <algorithm>

namespace hvd::launcher {

std::optional<std::chrono::seconds> HostBlacklist::add(const std::string& host,
                                                       Clock::time_point now) {
  Entry& e = hosts_[host];
  ++e.failures;
  e.returned = false;
  if (!cooldown_) return std::nullopt;
  // min, 2 min, 4 min, ... capped at max; the shift stops growing long before it overflows.
  int doublings = std::min(e.failures - 1, 30);
  auto wait = std::min(cooldown_->max, std::chrono::seconds(cooldown_->min.count() << doublings));
  e.until = now + wait;
  return wait;
}

bool HostBlacklist::blocked(const std::string& host, Clock::time_point now) const {
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return false;
  return !cooldown_ || now < it->second.until;
}

std::vector<std::string> HostBlacklist::takeReturned(Clock::time_point now) {
  std::vector<std::string> out;
  if (!cooldown_) return out;
  for (auto& [host, e] : hosts_)
    if (!e.returned && now >= e.until) {
      e.returned = true;
      out.push_back(host);
    }
  return out;
}

std::string HostBlacklist::describe(Clock::time_point now) const {
  std::string out;
  for (const auto& [host, e] : hosts_)
    if (blocked(host, now)) out += (out.empty() ? "" : ",") + host;
  return out;
}

}  // namespace hvd::launcher
