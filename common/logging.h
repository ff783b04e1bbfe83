// One logging facade for hvd: spdlog loggers named by subsystem (launcher, rdzv, tcp, runtime,
// ...), grouped in a Logs that gives them one prefix, level, subsystem filter and sink. Every
// line goes to stderr unless a sink is given, never stdout, which the launcher owns for
// forwarded output.
//
// Ownership: each Runtime owns a Logs with its rank's prefix (runtime/world.h, World::logs) and
// hands it to whatever logs on its behalf (engine, transports, rendezvous server, handshake
// listeners), so several Runtimes in one process each log as themselves. Code that runs outside
// any Runtime (hvdrun and its launcher, tools, a component built without a Logs) logs through
// the process's Logs, processLogs(), which hvdrun configures at start-up.
// Thread-safety: every function and method may be called from any thread.
#pragma once

#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace hvd::log {

struct LogSettings {
  std::string level = "warn";  // a name canonicalLevel() takes
  std::string subsystems;      // comma-separated subsystems to show; empty shows all
  std::string prefix;          // e.g. "host:pid [rank 1/4]"; empty gives "hvd"
  bool hideTime = false;       // no local date and time at the start of each line
};

// The level as spdlog names it (trace, debug, info, warn, error, critical, off) for one of those
// or Horovod's names (warning, fatal), in any case: HOROVOD_LOG_LEVEL=WARNING must keep working.
// Throws InvalidArgument naming the value.
std::string canonicalLevel(const std::string& name);

using SinkPtr = std::shared_ptr<spdlog::sinks::sink>;

// The loggers of one process component (a Runtime, or the process itself), sharing settings
// and a sink. spdlog keeps the line pattern in the sink, so a sink belongs to one Logs: a
// second Logs on the same sink would impose its prefix on the first one's lines.
class Logs {
 public:
  // `sink`: where the lines go; null: a stderr sink of its own.
  explicit Logs(const LogSettings& settings = {}, SinkPtr sink = nullptr);
  Logs(const Logs&) = delete;
  Logs& operator=(const Logs&) = delete;

  // Applies the settings to every logger, made or to be made. Throws InvalidArgument for an
  // unknown level, and then changes nothing.
  void configure(const LogSettings& settings);
  // The logger of one subsystem, created on first use with the current settings.
  std::shared_ptr<spdlog::logger> get(const std::string& subsystem);
  LogSettings settings() const;

 private:
  void apply(spdlog::logger& lg) const;  // with mutex_ held

  mutable std::mutex mutex_;  // guards everything below
  LogSettings settings_;
  std::set<std::string> shown_;  // settings_.subsystems, split
  SinkPtr sink_;
  std::map<std::string, std::shared_ptr<spdlog::logger>> loggers_;
};

// The process's Logs: hvdrun's, and every component's that was not given one.
Logs& processLogs();

// processLogs().configure(settings): hvdrun's main calls it once at start-up.
void configure(const LogSettings& settings);

// processLogs().get(subsystem).
std::shared_ptr<spdlog::logger> logger(const std::string& subsystem);

// `logs`'s logger of `subsystem`, or the process's when `logs` is null (a component built
// outside any Runtime).
std::shared_ptr<spdlog::logger> logger(Logs* logs, const std::string& subsystem);

}  // namespace hvd::log
