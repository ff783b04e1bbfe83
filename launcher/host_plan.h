// Where a job's ranks may go, decided once before anything starts: -H, --hostfile, the Slurm
// allocation hvdrun runs in, Open MPI's default hostfile (as Kubernetes' MPI Operator sets
// OMPI_MCA_orte_default_hostfile in a launcher pod), or this machine. Used by both kinds of job
// (launch_strategy.h): a static job places its ranks on these hosts; an elastic one without a
// discovery script offers them to its driver.
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
  std::string source;           // names the choice in error messages
  bool defaulted = false;       // no hosts given anywhere: this machine
  std::set<std::string> local;  // hosts that are this machine (classifyHosts)
};

// Throws InvalidArgument when both -H and --hostfile are given, or either is malformed.
HostPlan planHosts(const LaunchOptions& options, const Environment& env);

// Marks the hosts that are this machine, and rejects two names of one remote machine (they
// resolve to the same address), which would give it two sets of local ranks. Several names
// for this machine stay distinct "hosts" on purpose: that is how a placement over several
// hosts is tried out on one machine, without SSH.
void classifyHosts(HostPlan& plan);

// -np as given; else every listed slot (the allocation's task count inside Slurm, as srun
// does; every slot of a host list, as mpirun does). Throws without hosts to count.
int rankCount(const LaunchOptions& options, const HostPlan& plan);

}  // namespace hvd::launcher
