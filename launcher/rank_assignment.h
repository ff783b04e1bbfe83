// Placement of ranks on hosts: hosts are filled in order (host-major), as mpirun and horovodrun
// do, and -np caps the ranks even when more slots are listed. Pure: no I/O.
#pragma once

#include <vector>

#include "launcher/host_spec.h"

namespace hvd::launcher {

struct RankPlacement {
  int rank = 0, size = 1;
  int localRank = 0, localSize = 1;
  // Among the hosts that run a worker with this local rank: this host's index and their count.
  int crossRank = 0, crossSize = 1;
  std::string host;
};

// Throws InvalidArgument when np is below 1 or above the total slots (listing the hosts).
std::vector<RankPlacement> assignRanks(const std::vector<HostSlots>& hosts, int np);

}  // namespace hvd::launcher
