#include "launcher/host_plan.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "common/network.h"
#include "launcher/hostfile.h"
#include "launcher/slurm.h"

namespace hvd::launcher {

HostPlan planHosts(const LaunchOptions& o, const Environment& env) {
  if (!o.hosts.empty() && !o.hostfile.empty())
    throw InvalidArgument("give either -H or --hostfile, not both");
  if (!o.hosts.empty()) return {parseHostList(o.hosts), "-H", false, {}};
  if (!o.hostfile.empty()) return {loadHostfile(o.hostfile), "--hostfile " + o.hostfile, false, {}};
  auto nodes = env.find("SLURM_JOB_NODELIST"), tasks = env.find("SLURM_TASKS_PER_NODE");
  if (nodes != env.end() && tasks != env.end())
    return {slurmHosts(nodes->second, tasks->second),
            "the Slurm allocation (SLURM_JOB_NODELIST)",
            false,
            {}};
  auto ompiHostfile = env.find("OMPI_MCA_orte_default_hostfile");
  if (ompiHostfile != env.end() && !ompiHostfile->second.empty())
    return {loadHostfile(ompiHostfile->second),
            "OMPI_MCA_orte_default_hostfile=" + ompiHostfile->second,
            false,
            {}};
  return {{{"localhost", std::max(1, o.np)}}, "localhost", true, {}};
}

void classifyHosts(HostPlan& plan) {
  std::map<std::string, std::string> hostByAddress;
  for (const auto& h : plan.hosts) {
    auto addresses = net::resolve(h.host);
    if (net::isThisMachine(h.host, addresses)) {
      plan.local.insert(h.host);
      continue;
    }
    for (const auto& address : addresses) {
      auto [it, fresh] = hostByAddress.emplace(address, h.host);
      if (!fresh && it->second != h.host)
        throw InvalidArgument(plan.source + ": '" + it->second + "' and '" + h.host +
                              "' are the same machine (" + address +
                              "); list it once with the total slots");
    }
  }
}

int rankCount(const LaunchOptions& o, const HostPlan& plan) {
  if (o.np >= 0) return o.np;
  // As mpirun: every listed slot. With no hosts at all there is nothing to count.
  if (plan.defaulted)
    throw InvalidArgument(
        "-np/--num-proc is required without -H, --hostfile or a Slurm allocation (their slots "
        "give the default)");
  int total = 0;
  for (const auto& h : plan.hosts) total += h.slots;
  return total;
}

}  // namespace hvd::launcher
