// The runtime's immutable configuration, parsed once from the HVD_* parameters
// (common/params.h) in Runtime::create and passed by reference from there.
#pragma once

#include <chrono>
#include <string>

#include "common/params.h"

namespace hvd::runtime {

struct Topology {
  int rank = 0, size = 1;
  int localRank = 0, localSize = 1;
  int crossRank = 0, crossSize = 1;
  std::string hostname;
};

struct Config {
  Topology topology;
  std::string rendezvousAddr;  // empty: single-rank job without a launcher
  uint16_t rendezvousPort = 0;
  std::string secret;
  std::string jobId;
  std::chrono::milliseconds startTimeout{};
  std::chrono::milliseconds opTimeout{};
  std::string logLevel;
  std::string logSubsystems;

  // Throws InvalidArgument naming the variable for an invalid or inconsistent value.
  static Config fromParams(const params::ParamValues& values);
};

}  // namespace hvd::runtime
