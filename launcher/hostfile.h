// Hostfiles in the MPI/Horovod format: one "host slots=N" per line ("host" alone means one
// slot), '#' starts a comment, blank lines are skipped. Pure parsing, plus a loader.
#pragma once

#include <string>
#include <vector>

#include "launcher/host_spec.h"

namespace hvd::launcher {

// `path` only names the file in errors. Throws InvalidArgument naming the file, the line and
// the offending token.
std::vector<HostSlots> parseHostfile(const std::string& text, const std::string& path);
// Throws InvalidArgument if the file cannot be read.
std::vector<HostSlots> loadHostfile(const std::string& path);

}  // namespace hvd::launcher
