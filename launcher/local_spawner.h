// Starts one worker on this machine: its own process group (so the launcher can signal the
// worker and everything it started), stdin from /dev/null, stdout and stderr into pipes, and
// PR_SET_PDEATHSIG so the worker hears SIGTERM if hvdrun dies. Everything the child needs is
// prepared before fork(), since the launcher has threads and the child may only make
// async-signal-safe calls before exec.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/worker_env.h"

namespace hvd::launcher {

struct LocalWorker {
  pid_t pid = -1;  // also the process group id
  int stdoutFd = -1;
  int stderrFd = -1;
};

// Finds `program` the way execvp would, using PATH from `env`. Throws InvalidArgument
// "<program>: command not found" / "not executable" before anything starts.
std::string resolveExecutable(const std::string& program, const Environment& env);

// Throws IoError if fork or pipe fails.
LocalWorker spawnLocal(const std::string& executable, const std::vector<std::string>& argv,
                       const Environment& env);

}  // namespace hvd::launcher
