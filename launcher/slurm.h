// Hosts and slots of a Slurm allocation, from SLURM_JOB_NODELIST (compressed forms such as
// "node[01-04,07],gpu5") and SLURM_TASKS_PER_NODE ("2(x3),1"). Pure parsing.
#pragma once

#include <string>
#include <vector>

#include "common/slurm_lists.h"
#include "launcher/host_spec.h"

namespace hvd::launcher {

using slurm::expandNodeList;
using slurm::expandTasksPerNode;
// Both together; the counts must match (InvalidArgument otherwise).
std::vector<HostSlots> slurmHosts(const std::string& nodeList, const std::string& tasksPerNode);

}  // namespace hvd::launcher
