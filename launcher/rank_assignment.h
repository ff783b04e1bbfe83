// Placement of ranks on hosts: hosts are filled in order (host-major), as mpirun and horovodrun
// do, and -np caps the ranks even when more slots are listed. Pure: no I/O.
#pragma once

#include <vector>

#include "common/topology.h"
#include "launcher/host_spec.h"

namespace hvd::launcher {

using RankPlacement = hvd::Topology;

// Throws InvalidArgument when np is below 1 or above the total slots (listing the hosts).
std::vector<RankPlacement> assignRanks(const std::vector<HostSlots>& hosts, int np);

}  // namespace hvd::launcher
