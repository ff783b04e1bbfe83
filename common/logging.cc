#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/error.h"

namespace hvd::log {
namespace {

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

// Every stderr sink shares spdlog's console mutex, so lines of different Logs never interleave.
Logs::Logs(const LogSettings& settings, SinkPtr sink)
    : sink_(sink ? std::move(sink) : std::make_shared<spdlog::sinks::stderr_sink_mt>()) {
  configure(settings);
}

void Logs::apply(spdlog::logger& lg) const {
  bool shown = shown_.empty() || shown_.count(lg.name()) > 0;
  lg.set_level(shown ? parseLevel(settings_.level) : spdlog::level::off);
  std::string prefix = settings_.prefix.empty() ? "hvd" : settings_.prefix;
  std::string time = settings_.hideTime ? "" : "%Y-%m-%d %H:%M:%S.%e ";
  lg.set_pattern(time + prefix + " %^%l%$ [%n] %v");
}

void Logs::configure(const LogSettings& settings) {
  parseLevel(settings.level);
  std::lock_guard<std::mutex> lock(mutex_);
  settings_ = settings;
  shown_ = splitList(settings.subsystems);
  for (auto& [name, lg] : loggers_) apply(*lg);
}

std::shared_ptr<spdlog::logger> Logs::get(const std::string& subsystem) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& lg = loggers_[subsystem];
  if (!lg) {
    lg = std::make_shared<spdlog::logger>(subsystem, sink_);
    apply(*lg);
  }
  return lg;
}

LogSettings Logs::settings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return settings_;
}

Logs& processLogs() {
  static Logs logs;
  return logs;
}

void configure(const LogSettings& settings) { processLogs().configure(settings); }

std::shared_ptr<spdlog::logger> logger(const std::string& subsystem) {
  return processLogs().get(subsystem);
}

std::shared_ptr<spdlog::logger> logger(Logs* logs, const std::string& subsystem) {
  return logs ? logs->get(subsystem) : processLogs().get(subsystem);
}

}  // namespace hvd::log
