// Runs a short-lived helper program to completion: its stdin from a string, its stdout and
// stderr captured, within a deadline. For small tools the runtime asks a question of (munge),
// not for workers (the launcher's local_spawner.h owns those).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace hvd {

struct ProgramResult {
  int exitCode = 0;  // 128 + signal when a signal ended it
  std::string out;
  std::string err;
};

// argv[0] is looked up on PATH. Throws IoError naming the program when it cannot be started
// (not installed), TimeoutError when it runs past `timeout` (it is killed then). Output beyond
// `outputLimit` bytes per stream is dropped.
ProgramResult runProgram(const std::vector<std::string>& argv, const std::string& input,
                         std::chrono::milliseconds timeout, std::size_t outputLimit = 1 << 16);

}  // namespace hvd
