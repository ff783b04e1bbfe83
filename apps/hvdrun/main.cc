// hvdrun: parses the command line and hands off to the launcher.
#include <cstdio>

#include "common/error.h"
#include "common/logging.h"
#include "common/param_docs.h"
#include "common/params.h"
#include "launcher/check_build.h"
#include "launcher/command_line.h"
#include "launcher/launcher.h"
#include "launcher/python_path.h"
#include "launcher/runtime_flags.h"

#ifndef HVD_VERSION
#define HVD_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  hvd::launcher::CommandLine cl;
  if (int status = hvd::launcher::parseCommandLine(argc, argv, HVD_VERSION, cl); status >= 0)
    return status;
  if (cl.printEnvDoc) {
    for (const auto& row : hvd::params::envDocTable()) std::printf("%s\n", row.c_str());
    return 0;
  }
  using hvd::params::ParamId;
  hvd::launcher::LaunchOptions& o = cl.launch;
  try {
    o.runtimeParams = hvd::launcher::runtimeParams(cl.runtime);
    // What the workers will see: hvdrun's environment with the flags and file applied. A bad
    // value is reported here, before any worker starts.
    auto env = hvd::params::environmentSnapshot();
    for (const auto& [k, v] : o.runtimeParams) env[k] = v;
    auto values = hvd::params::ParamValues::fromMap(env);
    o.horovodCompat = values.getInt(ParamId::HorovodCompat) == 1;
    // HVD_LOG_LEVEL (or HOROVOD_LOG_LEVEL, or the config file's logging.level) in hvdrun's
    // environment sets hvdrun's level and its workers' as the flag does; the flag wins.
    try {
      o.logLevel = hvd::log::canonicalLevel(values.getString(ParamId::LogLevel));
    } catch (const hvd::InvalidArgument& e) {
      throw hvd::InvalidArgument(hvd::params::envName(ParamId::LogLevel) + ": " + e.what());
    }
    cl.logHideTime = values.getInt(ParamId::LogHideTime) == 1;
    if (cl.printConfig) {
      std::fputs(hvd::params::describeAll(values).c_str(), stdout);
      return 0;
    }
    if (cl.checkBuild) {
      hvd::launcher::addPythonPath(env, hvd::launcher::findPythonPackage("/proc/self/exe"),
                                   o.horovodCompat);
      auto report = hvd::launcher::checkBuild({HVD_VERSION, env});
      std::fputs(report.text.c_str(), stdout);
      return report.pythonUsable ? 0 : 1;
    }
  } catch (const hvd::InvalidArgument& e) {
    std::fprintf(stderr, "hvdrun: error: %s\n", e.what());
    return 2;
  }
  if (o.verbose && o.logLevel == "warn") o.logLevel = "info";
  try {
    hvd::log::configure({o.logLevel, "", "hvdrun", cl.logHideTime});
    return hvd::launcher::launch(o);
  } catch (const hvd::InvalidArgument& e) {
    std::fprintf(stderr, "hvdrun: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return 1;
  }
}
