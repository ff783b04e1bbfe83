// Where hvdrun finds the hvd Python package for its workers, so `hvdrun python train.py` works
// without the user setting PYTHONPATH: the build tree's python/ folder beside the hvdrun binary
// (build/apps/hvdrun -> build/python), and with the compatibility option, the folder holding
// hvd's `horovod` package.
#pragma once

#include <optional>
#include <string>

#include "launcher/worker_env.h"

namespace hvd::launcher {

struct PythonPackageDirs {
  std::optional<std::string> package;  // a folder with hvd/__init__.py, if not installed
  std::optional<std::string> compat;   // the folder with horovod/__init__.py (hvd/compat)
};

// `hvdrunPath` is this executable's path. Installed layouts (pip's bin/ next to
// lib/pythonX.Y/site-packages) are recognised for the compatibility folder.
PythonPackageDirs findPythonPackage(const std::string& hvdrunPath);

// Puts the package folder (and the compatibility folder when `horovodCompat`) in front of the
// workers' PYTHONPATH. InvalidArgument when compatibility is asked for and hvd's horovod package
// cannot be found.
void addPythonPath(Environment& env, const PythonPackageDirs& dirs, bool horovodCompat);

}  // namespace hvd::launcher
