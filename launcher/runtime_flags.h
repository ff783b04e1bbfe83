// The runtime's parameters as hvdrun takes them: flags (launcher/param_flags.h) and a JSON config
// file with the sections of Horovod's YAML config file, whose keys the parameter table declares
// (common/param_table.h). Both become HVD_* variables for the workers; flags override the file,
// and the file overrides hvdrun's own environment.
#pragma once

#include <map>
#include <string>
#include <variant>

#include "common/param_table.h"

namespace hvd::launcher {

// A flag's value as CLI11 parsed it: Integer rows long long, Number and Megabytes double,
// Switch bool, the others text.
using FlagValue = std::variant<long long, double, std::string, bool>;

struct RuntimeFlags {
  std::map<params::ParamId, FlagValue> given;  // the parameter flags given
  std::string configFile;                      // --config-file
};

// The HVD_* variables the flags for the workers (FlagTarget::Workers) and the file set. Throws
// InvalidArgument naming the file and key (an unknown or unsupported key, a value of the wrong
// type) or the flag.
std::map<std::string, std::string> runtimeParams(const RuntimeFlags& flags);

}  // namespace hvd::launcher
