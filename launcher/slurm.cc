#include "launcher/slurm.h"

#include "common/error.h"
#include "common/slurm_lists.h"

namespace hvd::launcher {

std::vector<HostSlots> slurmHosts(const std::string& nodeList, const std::string& tasksPerNode) {
  auto names = slurm::expandNodeList(nodeList);
  auto counts = slurm::expandTasksPerNode(tasksPerNode);
  if (names.size() != counts.size())
    throw InvalidArgument(detail::concat("SLURM_JOB_NODELIST names ", names.size(),
                                         " nodes but SLURM_TASKS_PER_NODE gives ", counts.size(),
                                         " counts"));
  std::vector<HostSlots> hosts;
  for (std::size_t i = 0; i < names.size(); ++i) hosts.push_back({names[i], counts[i]});
  return hosts;
}

}  // namespace hvd::launcher
