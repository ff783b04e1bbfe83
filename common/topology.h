// Where one rank sits in a job: computed by the launcher (launcher/rank_assignment.h) and read
// back by the runtime (runtime/config.h) from the HVD_* variables.
#pragma once

#include <string>

namespace hvd {

struct Topology {
  int rank = 0, size = 1;
  int localRank = 0, localSize = 1;
  // Among the hosts that run a worker with this local rank: this host's index and their count.
  int crossRank = 0, crossSize = 1;
  std::string hostname;
};

}  // namespace hvd
