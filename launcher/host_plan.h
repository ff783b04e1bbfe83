// Where a job's ranks may go, decided once before anything starts: -H, --hostfile, the Slurm
// allocation hvdrun runs in, or this machine. Used by both kinds of job (launch_strategy.h):
// a static job places its ranks on these hosts; an elastic one without a discovery script
// offers them to its driver.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "launcher/host_spec.h"
#include "launcher/launch_options.h"
#include "launcher/worker_env.h"

namespace hvd::launcher {

struct HostPlan {
  std::vector<HostSlots> hosts;
  std::string source;  // names the choice in error messages
  bool fromSlurm = false;
  std::set<std::string> local;  // hosts that are this machine (classifyHosts)
};

// Throws InvalidArgument when both -H and --hostfile are given, or either is malformed.
HostPlan planHosts(const LaunchOptions& options, const Environment& env);

// Marks the hosts that are this machine, and rejects two names of one remote machine (they
// resolve to the same address), which would give it two sets of local ranks. Several names
// for this machine stay distinct "hosts" on purpose: that is how a placement over several
// hosts is tried out on one machine, without SSH.
void classifyHosts(HostPlan& plan);

// -np as given; inside Slurm it defaults to the allocation's task count, as srun does.
int rankCount(const LaunchOptions& options, const HostPlan& plan);

}  // namespace hvd::launcher
