// The environment each worker starts with: the launcher's own, the -x exports, and the rank's
// placement under the HVD_*, HOROVOD_* and torchrun names. The job secret is only ever placed
// in the child's environment (never argv, never logged).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "launcher/rank_assignment.h"

namespace hvd::launcher {

using Environment = std::map<std::string, std::string>;

struct JobIdentity {
  std::string rendezvousAddr;
  uint16_t rendezvousPort = 0;
  std::string secret;
  std::string jobId;
};

// `exports` are "-x VAR=VALUE" or "-x VAR" (which copies VAR from `base`; InvalidArgument if
// base has no VAR). `extra` are launcher settings passed on as HVD_* variables.
Environment workerEnvironment(const Environment& base, const RankPlacement& placement,
                              const JobIdentity& job, const std::vector<std::string>& exports,
                              const Environment& extra);

}  // namespace hvd::launcher
