// Slurm's compressed lists: SLURM_JOB_NODELIST ("node[01-04,07],gpu5") and
// SLURM_TASKS_PER_NODE ("2(x3),1"). Used by hvdrun (hosts of an allocation) and by ranks that
// srun started directly (their node's task count). Pure parsing.
#pragma once

#include <string>
#include <vector>

namespace hvd::slurm {

// "node[01-03],x" -> node01 node02 node03 x (zero padding kept). Throws InvalidArgument naming
// the malformed part.
std::vector<std::string> expandNodeList(const std::string& nodeList);
// "2(x3),1" -> 2 2 2 1. Throws InvalidArgument naming the malformed part.
std::vector<int> expandTasksPerNode(const std::string& tasksPerNode);

}  // namespace hvd::slurm
