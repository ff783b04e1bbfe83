// What hvdrun was asked to do, after CLI parsing (apps/hvdrun) and before anything starts.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace hvd::launcher {

struct LaunchOptions {
  int np = 0;
  std::string hosts;  // -H; empty means localhost:np
  std::vector<std::string> command;
  std::vector<std::string> exports;  // -x
  std::chrono::seconds startTimeout{30};
  std::chrono::seconds grace{10};
  std::string outputDir;
  std::string logLevel = "warn";
  bool verbose = false;
};

}  // namespace hvd::launcher
