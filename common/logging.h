// One logging facade for hvd: spdlog loggers named by subsystem (launcher, rdzv, tcp, runtime,
// ...). Every line goes to stderr, never stdout, which the launcher owns for forwarded output.
// Thread-safety: configure() is called once at start-up, before other threads log; logger() may
// be called from any thread.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
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

// Applies the level, the subsystem filter and the prefix to every logger, made or to be made.
// Throws InvalidArgument for an unknown level.
void configure(const LogSettings& settings);

// The logger of one subsystem, created on first use with the configured settings.
std::shared_ptr<spdlog::logger> logger(const std::string& subsystem);

}  // namespace hvd::log
