// The parameter table (common/param_table.h) as people read it: hvdrun --print-config's listing
// and the table of docs/environment.md (hvdrun --print-env-doc; scripts/check_env_doc.py keeps
// the file equal to it).
#pragma once

#include <string>
#include <vector>

#include "common/params.h"

namespace hvd::params {

// Per parameter: its name and Horovod alias, type, default, range, the value `current` gives it
// (secret values are shown as "(set)", never printed), the description, and what sets it.
std::string describeAll(const ParamValues& current);

// The Markdown table of docs/environment.md: a header, then one line per parameter.
std::vector<std::string> envDocTable();

// The command-line spellings of a flag, "--x,!--no-x" as {"--x", "--no-x"}.
std::vector<std::string> flagSpellings(const FlagSpec& flag);

}  // namespace hvd::params
