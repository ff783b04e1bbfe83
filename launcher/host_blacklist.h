// The hosts an elastic job has taken out after a failure. Without a cooldown (Horovod's default)
// a host stays out for the rest of the job. With --blacklist-cooldown-range MIN MAX a host comes
// back MIN seconds after its first failure, and after each further failure waits twice as long
// as the time before, at most MAX seconds: a host that keeps failing is offered less and less
// often, while one that failed once (a transient fault, a rescheduled pod) is back soon.
// Pure: the caller passes the time.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvd::launcher {

struct CooldownRange {
  std::chrono::seconds min{0};
  std::chrono::seconds max{0};
};

class HostBlacklist {
 public:
  using Clock = std::chrono::steady_clock;

  explicit HostBlacklist(std::optional<CooldownRange> cooldown = std::nullopt)
      : cooldown_(cooldown) {}

  // Takes `host` out from `now`; returns how long for (nullopt: for good).
  std::optional<std::chrono::seconds> add(const std::string& host, Clock::time_point now);
  // Whether `host` is out at `now`.
  bool blocked(const std::string& host, Clock::time_point now) const;
  // Hosts whose cooldown ended since the last call (each reported once per failure).
  std::vector<std::string> takeReturned(Clock::time_point now);
  // Hosts out at `now`, comma separated ("" when none), for messages.
  std::string describe(Clock::time_point now) const;
  bool coolsDown() const { return cooldown_.has_value(); }

 private:
  struct Entry {
    int failures = 0;
    Clock::time_point until{};  // ignored without a cooldown
    bool returned = false;
  };
  std::optional<CooldownRange> cooldown_;
  std::map<std::string, Entry> hosts_;
};

}  // namespace hvd::launcher
