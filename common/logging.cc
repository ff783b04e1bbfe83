#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>
#include <sstream>

#include "common/error.h"

namespace hvd::log {
namespace {

struct State {
  std::mutex mutex;
  LogSettings settings;
  std::set<std::string> subsystems;
  std::shared_ptr<spdlog::sinks::stderr_sink_mt> sink =
      std::make_shared<spdlog::sinks::stderr_sink_mt>();
};

State& state() {
  static State s;
  return s;
}

std::set<std::string> splitList(const std::string& text) {
  std::set<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.insert(item);
  return out;
}

spdlog::level::level_enum parseLevel(const std::string& name) {
  return spdlog::level::from_str(canonicalLevel(name));
}

void apply(State& s, spdlog::logger& lg) {
  bool shown = s.subsystems.empty() || s.subsystems.count(lg.name()) > 0;
  lg.set_level(shown ? parseLevel(s.settings.level) : spdlog::level::off);
  std::string prefix = s.settings.prefix.empty() ? "hvd" : s.settings.prefix;
  std::string time = s.settings.hideTime ? "" : "%Y-%m-%d %H:%M:%S.%e ";
  lg.set_pattern(time + prefix + " %^%l%$ [%n] %v");
}

}  // namespace

std::string canonicalLevel(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "warning") return "warn";
  if (lower == "fatal") return "critical";
  for (const char* known : {"trace", "debug", "info", "warn", "error", "critical", "off"})
    if (lower == known) return lower;
  throw InvalidArgument("unknown log level '" + name +
                        "' (use trace, debug, info, warn, error, critical or off; Horovod's "
                        "warning and fatal are taken too)");
}

void configure(const LogSettings& settings) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  parseLevel(settings.level);
  s.settings = settings;
  s.subsystems = splitList(settings.subsystems);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& lg) { apply(s, *lg); });
}

std::shared_ptr<spdlog::logger> logger(const std::string& subsystem) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto existing = spdlog::get(subsystem)) return existing;
  auto lg = std::make_shared<spdlog::logger>(subsystem, s.sink);
  apply(s, *lg);
  spdlog::register_logger(lg);
  return lg;
}

}  // namespace hvd::log
