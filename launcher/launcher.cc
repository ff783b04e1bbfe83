#include "launcher/launcher.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <set>

#include "collectives/rendezvous/rendezvous_server.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "collectives/transport/shm/shm_cleanup.h"
#include "common/auth.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/params.h"
#include "launcher/elastic_driver.h"
#include "launcher/elastic_workers.h"
#include "launcher/host_discovery.h"
#include "launcher/host_spec.h"
#include "launcher/hostfile.h"
#include "launcher/job.h"
#include "launcher/local_spawner.h"
#include "launcher/orphan_guardian.h"
#include "launcher/python_path.h"
#include "launcher/remote_hosts.h"
#include "launcher/remote_ranks.h"
#include "launcher/slurm.h"
#include "launcher/ssh/remote_command.h"
#include "launcher/ssh/ssh_preflight.h"

namespace hvd::launcher {
namespace {

// Where the ranks go, decided once: -H, --hostfile, the Slurm allocation hvdrun runs in, or
// this machine. `source` names the choice in error messages.
struct HostPlan {
  std::vector<HostSlots> hosts;
  std::string source;
  bool fromSlurm = false;
  std::set<std::string> local;  // hosts that are this machine
};

HostPlan planHosts(const LaunchOptions& o, const Environment& env) {
  if (!o.hosts.empty() && !o.hostfile.empty())
    throw InvalidArgument("give either -H or --hostfile, not both");
  if (!o.hosts.empty()) return {parseHostList(o.hosts), "-H", false, {}};
  if (!o.hostfile.empty()) return {loadHostfile(o.hostfile), "--hostfile " + o.hostfile, false, {}};
  auto nodes = env.find("SLURM_JOB_NODELIST"), tasks = env.find("SLURM_TASKS_PER_NODE");
  if (nodes != env.end() && tasks != env.end())
    return {slurmHosts(nodes->second, tasks->second),
            "the Slurm allocation (SLURM_JOB_NODELIST)",
            true,
            {}};
  return {{{"localhost", std::max(1, o.np)}}, "localhost", false, {}};
}

// Marks the hosts that are this machine, and rejects two names of one remote machine (they
// resolve to the same address), which would give it two sets of local ranks. Several names
// for this machine stay distinct "hosts" on purpose: that is how a placement over several
// hosts is tried out on one machine, without SSH.
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

void validate(const LaunchOptions& o) {
  if (o.command.empty())
    throw InvalidArgument("no command to run (usage: hvdrun -np N [-H hosts] command [args])");
  if (looksLikeHostSlots(o.command[0]))
    throw InvalidArgument("the command '" + o.command[0] +
                          "' looks like a host spec: join hosts with commas, as in "
                          "-H a:1,b:1");
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

std::string workingDirectory() {
  char buf[PATH_MAX] = {};
  if (!::getcwd(buf, sizeof buf)) throw IoError("cannot read the working directory");
  return buf;
}

// The remote hosts that get ranks, in order, with how to reach each.
std::vector<ssh::SshTarget> remoteTargets(const LaunchOptions& o, const HostPlan& plan,
                                          const std::vector<RankPlacement>& placements,
                                          const Environment& env) {
  std::set<std::string> used;
  for (const auto& p : placements) used.insert(p.hostname);
  std::vector<ssh::SshTarget> out;
  for (const auto& h : plan.hosts)
    if (used.count(h.host) && !plan.local.count(h.host)) out.push_back(sshTargetFor(h, o.ssh, env));
  return out;
}

// Checks the remote hosts, `concurrency` at once; throws one report of all failures, before any
// rank starts. Returns this machine's address on the connection to each host, and the checked
// connections.
ssh::PreflightReport checkRemoteHosts(const std::vector<ssh::SshTarget>& targets,
                                      const std::vector<RankPlacement>& placements,
                                      const LaunchOptions& o, const Environment& env,
                                      const std::string& cwd,
                                      const std::map<std::string, std::string>& interfaces,
                                      std::size_t concurrency) {
  std::vector<ssh::PreflightHost> checks;
  Environment forwarded = ssh::forwardedEnvironment(env);
  for (const auto& t : targets) {
    std::size_t ranks = 0;
    for (const auto& p : placements) ranks += p.hostname == t.alias;
    checks.push_back(
        {t,
         ssh::checkScript({t.alias, cwd, forwarded, o.command, interfaceFor(interfaces, t.alias),
                           static_cast<int>(o.grace.count()), ""}),
         ranks, nullptr});
  }
  ssh::ConnectSlots slots(concurrency);
  log::logger("launcher")
      ->info("checking {} remote hosts, at most {} at once (--ssh-concurrency)", targets.size(),
             slots.limit());
  auto report = ssh::preflight(checks, slots);
  if (!report.failures.empty()) {
    std::string text =
        detail::concat("cannot start the job: ", report.failures.size(), " of ", targets.size(),
                       " remote hosts failed the check; nothing "
                       "was started:");
    for (const auto& f : report.failures) text += "\n  " + f;
    throw Error(text);
  }
  return report;
}

// The address the rendezvous listens on: loopback for a one-machine job; otherwise this
// machine's address on the chosen interface, else the one it reached the first remote host from.
std::string rendezvousAddress(const HostPlan& plan, const std::vector<ssh::SshTarget>& targets,
                              const std::map<std::string, ssh::ReadyHost>& ready,
                              const std::map<std::string, std::string>& interfaces) {
  if (targets.empty()) return "127.0.0.1";
  std::string thisHost = plan.local.empty() ? "" : *plan.local.begin();
  std::string iface = interfaceFor(interfaces, thisHost);
  if (!iface.empty())
    return net::addressOfInterface(iface, thisHost.empty() ? "(hvdrun's)" : thisHost);
  std::string chosen = ready.at(targets.front().alias).localAddress;
  for (const auto& t : targets)
    if (ready.at(t.alias).localAddress != chosen)
      log::logger("launcher")
          ->warn(
              "this machine reaches {} from {} but {} from {}; the rendezvous listens on {} only "
              "(choose with --network-interface)",
              targets.front().alias, chosen, t.alias, ready.at(t.alias).localAddress, chosen);
  if (net::isLoopback(chosen))
    throw InvalidArgument("a multi-host job cannot use the loopback address " + chosen +
                          "; choose an interface with --network-interface");
  return chosen;
}

// A random job id and 256-bit secret.
JobIdentity newJobIdentity() {
  JobIdentity job;
  job.secret = auth::randomHex(32);
  job.jobId = auth::randomHex(8);
  return job;
}

// A local worker stopped during init may not have unlinked its shared-memory segment (a remote
// host's run script removes its ranks' own).
void removeLeftSegments(const JobIdentity& job) {
  if (int left = collectives::shm::removeSegments(collectives::shm::jobSegmentPrefix(job.jobId)))
    log::logger("launcher")
        ->info(
            "removed {} shared-memory segments the job's ranks left in "
            "/dev/shm",
            left);
}

// Environment every worker gets beyond its placement: the runtime knobs and timeouts.
Environment commonWorkerParams(const LaunchOptions& o) {
  Environment extra(o.runtimeParams.begin(), o.runtimeParams.end());
  extra[params::envName(params::ParamId::StartTimeout)] = std::to_string(o.startTimeout.count());
  extra.insert({params::envName(params::ParamId::LogLevel), o.logLevel});  // unless set already
  return extra;
}

// How long the rendezvous gives a connection to prove the job secret: the workers' value.
std::chrono::milliseconds handshakeTimeout(const LaunchOptions& o, const Environment& base) {
  Environment env = base;
  for (const auto& [name, value] : o.runtimeParams) env[name] = value;
  return std::chrono::seconds(
      params::ParamValues::fromMap(env).getInt(params::ParamId::HandshakeTimeout));
}

// torch.distributed's env:// rendezvous, which torchrun gives a script (RANK, WORLD_SIZE and
// LOCAL_RANK are placement variables): MASTER_ADDR, rank 0's host as the other hosts reach it,
// and MASTER_PORT, a port free on this machine now. A value the user set (in hvdrun's
// environment or with -x) is kept. Not for elastic jobs, whose rank 0 moves between rounds.
bool userSet(const std::string& name, const Environment& base,
             const std::vector<std::string>& exports) {
  if (base.count(name)) return true;
  for (const auto& x : exports)
    if (x.substr(0, x.find('=')) == name) return true;
  return false;
}

void addTorchRendezvous(Environment& extra, const Environment& base,
                        const std::vector<std::string>& exports, const RankPlacement& rank0,
                        const HostPlan& plan, const std::vector<ssh::SshTarget>& targets,
                        const std::string& rendezvousAddress) {
  auto given = [&](const std::string& name) { return userSet(name, base, exports); };
  if (!given("MASTER_ADDR")) {
    std::string address = rendezvousAddress;  // this machine's, as every host reaches it
    if (!plan.local.count(rank0.hostname))
      for (const auto& t : targets)
        if (t.alias == rank0.hostname) address = t.address;
    extra["MASTER_ADDR"] = address;
  }
  if (!given("MASTER_PORT")) {
    try {
      extra["MASTER_PORT"] = std::to_string(net::unusedTcpPort());
    } catch (const Error& e) {  // only torch.distributed needs it; hvd's jobs run without
      log::logger("launcher")->warn("{}; workers get no MASTER_PORT (set it with -x)", e.what());
    }
  }
}

// The interface torch's gloo backend listens on (GLOO_SOCKET_IFNAME; without it gloo takes the
// address the host name resolves to, often loopback): --network-interface's for the host; on
// this machine in a multi-host job, the interface of the rendezvous address.
std::string glooInterface(const std::string& iface, bool local, bool oneMachine,
                          const std::string& rendezvousAddress) {
  if (!iface.empty() || !local || oneMachine) return iface;
  for (const auto& a : net::interfaceAddresses())
    if (a.address == rendezvousAddress) return a.interface;
  return "";
}

ElasticOptions elasticOptions(const LaunchOptions& o) {
  const ElasticFlags& f = o.elastic;
  ElasticOptions e;
  e.minNp = f.minNp > 0 ? f.minNp : o.np;
  if (e.minNp <= 0)
    throw InvalidArgument("an elastic job needs --min-np or -np (the fewest workers it runs with)");
  e.maxNp = f.maxNp;
  if (e.maxNp > 0 && e.maxNp < e.minNp)
    throw InvalidArgument(detail::concat("--max-np ", e.maxNp, " is below --min-np ", e.minNp));
  if (o.np > 0 && e.maxNp > 0 && o.np > e.maxNp)
    throw InvalidArgument(detail::concat("-np ", o.np, " is above --max-np ", e.maxNp));
  e.timeout = f.timeout;
  e.resetLimit = f.resetLimit;
  if (!f.cooldownRange.empty()) {
    auto [lo, hi] = std::pair{f.cooldownRange.at(0), f.cooldownRange.at(1)};
    if (hi < lo)
      throw InvalidArgument(detail::concat("--blacklist-cooldown-range ", lo, " ", hi,
                                           ": the maximum is below the minimum"));
    e.cooldown = CooldownRange{std::chrono::seconds(lo), std::chrono::seconds(hi)};
  }
  return e;
}

// Where an elastic job's store listens first: --network-interface's address, else loopback.
// Without an interface, the store also listens on the address this machine reaches each
// remote host from, as hosts join (ElasticLaunch::listenOn); never on every interface.
std::string elasticRendezvousAddress(const std::map<std::string, std::string>& interfaces) {
  if (auto all = interfaces.find(""); all != interfaces.end())
    return net::addressOfInterface(all->second, "(hvdrun's)");
  return "127.0.0.1";
}

// An elastic job: hvdrun's driver (elastic_driver.h) starts and replaces the workers, on this
// machine and over SSH (elastic_workers.h).
int launchElastic(const LaunchOptions& o, const Environment& base) {
  auto log = log::logger("launcher");
  const ElasticFlags& flags = o.elastic;
  if (!flags.discoveryScript.empty() && (!o.hosts.empty() || !o.hostfile.empty()))
    throw InvalidArgument("give either --host-discovery-script or -H/--hostfile, not both");
  ElasticOptions elastic = elasticOptions(o);
  std::size_t sshSlots = sshConcurrency(o.ssh, base);
  std::string script = flags.discoveryScript.empty()
                           ? std::string()
                           : resolveExecutable(flags.discoveryScript, base);
  std::map<std::string, bool> localCache;
  auto isLocal = [&](const std::string& host) {
    auto it = localCache.find(host);
    if (it == localCache.end())
      it = localCache.emplace(host, net::isThisMachine(host, net::resolve(host))).first;
    return it->second;
  };
  std::vector<HostSlots> fixed;
  if (script.empty()) {
    HostPlan plan = planHosts(o, base);
    fixed = plan.hosts;
    if (o.hosts.empty() && o.hostfile.empty() && !plan.fromSlurm)
      fixed = {{"localhost", std::max(elastic.minNp, elastic.maxNp)}};
  } else if (o.networkInterface.find('=') != std::string::npos) {
    throw InvalidArgument("--network-interface '" + o.networkInterface +
                          "': with "
                          "--host-discovery-script, give one interface for every host");
  }
  ElasticLaunch launch;
  launch.base = base;
  launch.exports = o.exports;
  launch.command = o.command;
  launch.workingDir = workingDirectory();
  launch.interfaces = parseNetworkInterfaces(o.networkInterface, fixed);
  launch.ssh = o.ssh;
  launch.graceSeconds = static_cast<int>(o.grace.count());
  // Workers on this machine run the program found here; with no local host in a fixed list,
  // the remote hosts' checks look for it.
  bool localPossible =
      !script.empty() ||
      std::any_of(fixed.begin(), fixed.end(), [&](const HostSlots& h) { return isLocal(h.host); });
  if (localPossible) launch.executable = resolveExecutable(o.command[0], base);
  launch.extra = commonWorkerParams(o);
  launch.extra[params::envName(params::ParamId::Elastic)] = "1";
  if (flags.timeoutGiven)
    launch.extra[params::envName(params::ParamId::ElasticTimeout)] =
        std::to_string(flags.timeout.count());
  launch.job = newJobIdentity();
  workerEnvironment(base, RankPlacement{}, launch.job, o.exports, launch.extra);  // checks -x
  // Before any thread (the discovery's, the rendezvous server's): the guardian forks.
  auto guardian = OrphanGuardian::start(o.grace);
  guardian->removeSegmentsOnDeath(collectives::shm::jobSegmentPrefix(launch.job.jobId));
  std::unique_ptr<HostDiscovery> discovery;
  HostSource hosts = [fixed] { return fixed; };
  if (!script.empty()) {
    discovery =
        std::make_unique<HostDiscovery>(script, flags.slotsPerHost, base, std::chrono::seconds(1));
    hosts = [&] { return discovery->latest(); };
  }
  std::string bindAddress = elasticRendezvousAddress(launch.interfaces);
  rendezvous::RendezvousServer server(bindAddress, launch.job.secret, 0, handshakeTimeout(o, base));
  launch.job.rendezvousAddr = bindAddress;
  launch.job.rendezvousPort = server.port();
  if (bindAddress != "127.0.0.1") launch.remoteRendezvousAddr = bindAddress;
  launch.listenOn = [&server](const std::string& address) {
    if (!net::isLoopback(address)) server.listenAlso(address);
  };
  rendezvous::TcpStoreClient store(bindAddress, server.port(), launch.job.secret, o.startTimeout);
  log->info("elastic job {}: --min-np {} --max-np {}; rendezvous at {}:{}", launch.job.jobId,
            elastic.minNp, elastic.maxNp, bindAddress, server.port());
  JobIdentity job = launch.job;
  ElasticWorkers workers(std::move(launch), isLocal);
  RemoteRanks remote(sshSlots);
  Job running(o, {}, remote, *guardian);
  ElasticDriver driver(elastic, hosts, script.empty(), workers, store, job.jobId);
  running.setPolicy(&driver);
  int code = running.run();
  removeLeftSegments(job);
  return code;
}

}  // namespace

int launch(const LaunchOptions& options) {
  auto log = log::logger("launcher");
  Environment base = params::environmentSnapshot();
  addPythonPath(base, findPythonPackage("/proc/self/exe"), options.horovodCompat);
  validate(options);
  if (options.elastic.requested()) return launchElastic(options, base);
  if (!options.elastic.cooldownRange.empty())
    throw InvalidArgument(
        "--blacklist-cooldown-range applies to elastic jobs only (give "
        "--min-np, --max-np or --host-discovery-script)");
  // Read before anything starts: a malformed HVD_SSH_CONCURRENCY is refused at once.
  std::size_t sshSlots = sshConcurrency(options.ssh, base);
  HostPlan plan = planHosts(options, base);
  classifyHosts(plan);
  std::vector<HostSlots>& hosts = plan.hosts;
  int np = rankCount(options, plan);
  auto placements = assignRanks(hosts, np);
  auto interfaces = parseNetworkInterfaces(options.networkInterface, hosts);
  bool anyLocal = std::any_of(placements.begin(), placements.end(),
                              [&](const RankPlacement& p) { return plan.local.count(p.hostname); });
  std::string localExecutable = anyLocal ? resolveExecutable(options.command[0], base) : "";
  std::string cwd = workingDirectory();
  // The guardian forks without exec, so it must exist before any thread (the preflight's, the
  // rendezvous server's, the remote hosts') does, and before any SSH connection it would inherit.
  auto guardian = OrphanGuardian::start(options.grace);
  auto targets = remoteTargets(options, plan, placements, base);
  ssh::PreflightReport checked;
  if (!targets.empty())
    checked = checkRemoteHosts(targets, placements, options, base, cwd, interfaces, sshSlots);
  std::string bindAddress = rendezvousAddress(plan, targets, checked.ready, interfaces);

  JobIdentity job = newJobIdentity();
  guardian->removeSegmentsOnDeath(collectives::shm::jobSegmentPrefix(job.jobId));
  rendezvous::RendezvousServer server(bindAddress, job.secret, 0, handshakeTimeout(options, base));
  job.rendezvousAddr = server.address();
  job.rendezvousPort = server.port();
  log->info("job {}: {} ranks on {}; rendezvous at {}:{}", job.jobId, placements.size(),
            describeHosts(hosts), job.rendezvousAddr, job.rendezvousPort);
  for (const auto& t : targets)
    log->info("host {}: ssh {}:{} as {}, reached from {}; ranks use {}", t.alias, t.address, t.port,
              t.user, checked.ready.at(t.alias).localAddress,
              interfaceFor(interfaces, t.alias).empty()
                  ? std::string("the address that reaches the rendezvous")
                  : "interface " + interfaceFor(interfaces, t.alias));

  Environment extra = commonWorkerParams(options);
  addTorchRendezvous(extra, base, options.exports, placements.front(), plan, targets, bindAddress);
  std::vector<WorkerSpec> workers;
  std::map<std::string, std::vector<RemoteRankSpec>> remoteByHost;
  for (const auto& p : placements) {
    Environment env = workerEnvironment(base, p, job, options.exports, extra);
    std::string iface = interfaceFor(interfaces, p.hostname);
    if (!iface.empty()) env[params::envName(params::ParamId::NetworkInterface)] = iface;
    std::string gloo =
        glooInterface(iface, plan.local.count(p.hostname) > 0, targets.empty(), bindAddress);
    if (!gloo.empty() && !userSet("GLOO_SOCKET_IFNAME", base, options.exports))
      env["GLOO_SOCKET_IFNAME"] = gloo;
    if (plan.local.count(p.hostname)) {
      workers.push_back({p, env, localExecutable, options.command});
    } else {
      ssh::RemoteRun run{p.hostname,
                         cwd,
                         ssh::forwardedEnvironment(env),
                         options.command,
                         iface,
                         static_cast<int>(options.grace.count()),
                         collectives::shm::jobSegmentPrefix(job.jobId)};
      remoteByHost[p.hostname].push_back({p, p.rank, ssh::runScript(run)});
    }
    log->info("rank {}: host {} local {}/{} cross {}/{}", p.rank, p.hostname, p.localRank,
              p.localSize, p.crossRank, p.crossSize);
  }
  RemoteRanks remote(sshSlots);
  for (const auto& t : targets)
    remote.addHost(std::move(checked.ready.at(t.alias)), std::move(remoteByHost[t.alias]));
  Job running(options, std::move(workers), remote, *guardian);
  int code = running.run();
  removeLeftSegments(job);
  return code;
}

}  // namespace hvd::launcher
