// hvdrun's command line: its flags (CLI11), horovodrun's and mpirun's spellings of them, and
// where each lands: the launch options, and the runtime knobs the workers get as HVD_*.
#pragma once

#include <string>

#include "launcher/launch_options.h"
#include "launcher/runtime_flags.h"

namespace hvd::launcher {

struct CommandLine {
  LaunchOptions launch;      // with the command, and every flag that is not a runtime knob
  RuntimeFlags runtime;      // parameter flags, not yet merged with --config-file (runtime_flags.h)
  bool logHideTime = false;  // HVD_LOG_HIDE_TIME=1 from --log-hide-timestamp, the file or the env
  bool printConfig = false;
  bool printEnvDoc = false;
  bool checkBuild = false;
};

// Parses argv into `out`. Returns -1 to go on, or the exit status once the help, the version,
// the list of flags (--print-flags) or a usage error (naming the flag or the unknown option) has
// been printed.
int parseCommandLine(int argc, char** argv, const std::string& version, CommandLine& out);

}  // namespace hvd::launcher
