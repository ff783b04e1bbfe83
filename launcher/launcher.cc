#include "launcher/launcher.h"

#include <unistd.h>

#include "common/auth.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/params.h"
#include "launcher/host_spec.h"
#include "launcher/hostfile.h"
#include "launcher/local_job.h"
#include "launcher/python_path.h"
#include "launcher/local_spawner.h"
#include "launcher/orphan_guardian.h"
#include "launcher/rendezvous_server.h"
#include "launcher/slurm.h"

namespace hvd::launcher {
namespace {

std::string thisHostname() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "localhost";
}

bool isThisMachine(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0 ||
         host == thisHostname();
}

// Where the ranks go, decided once: -H, --hostfile, the Slurm allocation hvdrun runs in, or
// this machine. `source` names the choice in error messages.
struct HostPlan {
  std::vector<HostSlots> hosts;
  std::string source;
  bool fromSlurm = false;
};

HostPlan planHosts(const LaunchOptions& o, const Environment& env) {
  if (!o.hosts.empty() && !o.hostfile.empty())
    throw InvalidArgument("give either -H or --hostfile, not both");
  if (!o.hosts.empty()) return {parseHostList(o.hosts), "-H"};
  if (!o.hostfile.empty()) return {loadHostfile(o.hostfile), "--hostfile " + o.hostfile};
  auto nodes = env.find("SLURM_JOB_NODELIST"), tasks = env.find("SLURM_TASKS_PER_NODE");
  if (nodes != env.end() && tasks != env.end())
    return {slurmHosts(nodes->second, tasks->second),
            "the Slurm allocation (SLURM_JOB_NODELIST)", true};
  return {{{"localhost", std::max(1, o.np)}}, "localhost"};
}

void validate(const LaunchOptions& o, const HostPlan& plan) {
  if (o.command.empty())
    throw InvalidArgument("no command to run (usage: hvdrun -np N [-H hosts] command [args])");
  if (looksLikeHostSlots(o.command[0]))
    throw InvalidArgument("the command '" + o.command[0] +
                          "' looks like a host spec: join hosts with commas, as in "
                          "-H a:1,b:1");
  for (const auto& h : plan.hosts)
    if (!isThisMachine(h.host))
      throw InvalidArgument(plan.source + ": host '" + h.host +
                            "' is not this machine; this hvdrun launches on the local host only "
                            "(use localhost:N)");
}

// -np as given; inside Slurm it defaults to the allocation's task count, as srun does.
int rankCount(const LaunchOptions& o, const HostPlan& plan) {
  if (o.np >= 0) return o.np;
  if (!plan.fromSlurm)
    throw InvalidArgument("-np/--num-proc is required (outside a Slurm allocation)");
  int total = 0;
  for (const auto& h : plan.hosts) total += h.slots;
  return total;
}

}  // namespace

int launch(const LaunchOptions& options) {
  auto log = log::logger("launcher");
  Environment base = params::environmentSnapshot();
  addPythonPath(base, findPythonPackage("/proc/self/exe"), options.horovodCompat);
  HostPlan plan = planHosts(options, base);
  validate(options, plan);
  std::vector<HostSlots>& hosts = plan.hosts;
  int np = rankCount(options, plan);
  auto placements = assignRanks(hosts, np);
  resolveExecutable(options.command[0], base);

  // The guardian forks without exec, so it must exist before the server's thread does.
  auto guardian = OrphanGuardian::start(options.grace);
  JobIdentity job;
  job.secret = auth::randomHex(32);
  job.jobId = auth::randomHex(8);
  // Every host is this machine, so the rendezvous listens on loopback only.
  RendezvousServer server("127.0.0.1", job.secret);
  job.rendezvousAddr = server.address();
  job.rendezvousPort = server.port();
  log->info("job {}: {} ranks on {}; rendezvous at {}:{}", job.jobId, placements.size(),
            describeHosts(hosts), job.rendezvousAddr, job.rendezvousPort);

  Environment extra(options.runtimeParams.begin(), options.runtimeParams.end());
  extra["HVD_START_TIMEOUT"] = std::to_string(options.startTimeout.count());
  if (!extra.count("HVD_LOG_LEVEL")) extra["HVD_LOG_LEVEL"] = options.logLevel;
  std::vector<WorkerSpec> workers;
  for (const auto& p : placements) {
    workers.push_back({p, workerEnvironment(base, p, job, options.exports, extra)});
    log->info("rank {}: host {} local {}/{} cross {}/{}", p.rank, p.hostname, p.localRank,
              p.localSize, p.crossRank, p.crossSize);
  }
  LocalJob localJob(options, std::move(workers), *guardian);
  return localJob.run();
}

}  // namespace hvd::launcher
