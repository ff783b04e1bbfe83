// hvdrun --check-build: what this build of hvd supports and what this machine offers it, in
// the spirit of horovodrun --check-build. hvdrun's own build (transports, CUDA, NCCL headers),
// the room in /dev/shm for the shared-memory transport, the CUDA driver and devices and the
// NCCL library it would load, and what the workers' Python
// (python3 on PATH, with the PYTHONPATH hvdrun gives workers) finds: hvd's package and its build,
// and the frameworks installed beside it.
#pragma once

#include <chrono>
#include <string>

#include "launcher/worker_env.h"

namespace hvd::launcher {

struct CheckBuildOptions {
  std::string version;  // hvdrun's version
  Environment env;      // what a worker would get (PYTHONPATH included)
  std::string python = "python3";
  std::chrono::seconds pythonTimeout{60};
};

struct CheckBuildReport {
  std::string text;
  // False when hvd's Python package cannot be imported by the workers' Python: `hvdrun python
  // train.py` would fail. Missing GPUs or NCCL are reported but do not fail the check.
  bool pythonUsable = false;
};

CheckBuildReport checkBuild(const CheckBuildOptions& options);

}  // namespace hvd::launcher
