// Hosts and slots of a Slurm allocation, from SLURM_JOB_NODELIST (compressed forms such as
// "node[01-04,07],gpu5") and SLURM_TASKS_PER_NODE ("2(x3),1"). Pure parsing.
#pragma once

#include <string>
#include <vector>

#include "launcher/host_spec.h"

namespace hvd::launcher {

// "node[01-03],x" -> node01 node02 node03 x (zero padding kept). Throws InvalidArgument naming
// the malformed part.
std::vector<std::string> expandNodeList(const std::string& nodeList);
// "2(x3),1" -> 2 2 2 1. Throws InvalidArgument naming the malformed part.
std::vector<int> expandTasksPerNode(const std::string& tasksPerNode);
// Both together; the counts must match (InvalidArgument otherwise).
std::vector<HostSlots> slurmHosts(const std::string& nodeList, const std::string& tasksPerNode);

}  // namespace hvd::launcher
