// A static job (-np): its ranks are placed once, host-major, on the planned hosts; every remote
// host is checked before any rank starts; the first failed rank ends the job (Job, no policy).

#include <algorithm>
#include <map>
#include <set>

#include "collectives/transport/shm/shm_cleanup.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/params.h"
#include "launcher/host_plan.h"
#include "launcher/launch_agent.h"
#include "launcher/launch_strategy.h"
#include "launcher/local_spawner.h"
#include "launcher/remote_hosts.h"
#include "launcher/ssh/remote_command.h"
#include "launcher/ssh/ssh_preflight.h"

namespace hvd::launcher {
namespace {

// Whether `name` was set by the user, in hvdrun's environment or with -x: such a value is kept.
bool userSet(const std::string& name, const Environment& base,
             const std::vector<std::string>& exports) {
  if (base.count(name)) return true;
  for (const auto& x : exports)
    if (x.substr(0, x.find('=')) == name) return true;
  return false;
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

class StaticStrategy : public LaunchStrategy {
 public:
  explicit StaticStrategy(const LaunchContext& c);
  void addWorkerParams(Environment&) const override {}
  void prepare() override;
  HostReach reach() override;
  std::string describe(const JobIdentity& job) const override {
    return detail::concat("job ", job.jobId, ": ", placements_.size(), " ranks on ",
                          describeHosts(plan_.hosts));
  }
  std::size_t mostRanks() const override { return placements_.size(); }
  JobStart start(rendezvous::RendezvousServer& server, const JobIdentity& job,
                 const Environment& extra, RemoteRanks& remote) override;

 private:
  void addTorchRendezvous(Environment& extra, const std::string& rendezvousAddress) const;
  WorkerSpec localRank(const RankPlacement& p, Environment env) const {
    return {p, std::move(env), localExecutable_, c_.options.command};
  }
  RemoteRankSpec remoteRank(const RankPlacement& p, const Environment& env,
                            const std::string& iface, const JobIdentity& job) const;

  LaunchContext c_;
  HostPlan plan_;
  std::vector<RankPlacement> placements_;
  std::map<std::string, std::string> interfaces_;
  std::string localExecutable_;
  std::vector<ssh::SshTarget> targets_;  // the remote hosts that get ranks, in host order
  std::string agent_;                    // --launch-agent, resolved; "": none
  // With an agent: the remote hosts that get ranks -> this machine's address towards each.
  std::vector<std::pair<std::string, std::string>> agentRoutes_;
  ssh::PreflightReport checked_;
};

StaticStrategy::StaticStrategy(const LaunchContext& c)
    : c_(c), plan_(planHosts(c.options, c.base)) {
  const LaunchOptions& o = c.options;
  classifyHosts(plan_);
  placements_ = assignRanks(plan_.hosts, rankCount(o, plan_));
  interfaces_ = parseNetworkInterfaces(o.networkInterface, plan_.hosts);
  bool anyLocal = std::any_of(placements_.begin(), placements_.end(), [&](const RankPlacement& p) {
    return plan_.local.count(p.hostname) > 0;
  });
  agent_ = resolveLaunchAgent(o, c.base);
  if (anyLocal && agent_.empty()) localExecutable_ = resolveExecutable(o.command[0], c.base);
  std::set<std::string> used;
  for (const auto& p : placements_) used.insert(p.hostname);
  for (const auto& h : plan_.hosts) {
    if (!used.count(h.host) || plan_.local.count(h.host)) continue;
    if (agent_.empty())
      targets_.push_back(sshTargetFor(h, o.ssh, c.base));
    else
      agentRoutes_.emplace_back(h.host, "");
  }
}

// Checks the remote hosts, --ssh-concurrency at once; throws one report of all failures,
// before any rank starts. Keeps each host's checked connection for its ranks.
void StaticStrategy::prepare() {
  // The agent's workers are told the address this machine reaches their host from.
  for (auto& [host, source] : agentRoutes_) {
    try {
      source = net::sourceAddressTowards(host);
    } catch (const Error& e) {
      throw Error(
          detail::concat("cannot start the job: host ", host, " (--launch-agent): ", e.what()));
    }
  }
  if (targets_.empty()) return;
  const LaunchOptions& o = c_.options;
  std::vector<ssh::PreflightHost> checks;
  Environment forwarded = ssh::forwardedEnvironment(c_.base);
  for (const auto& t : targets_) {
    std::size_t ranks = 0;
    for (const auto& p : placements_) ranks += p.hostname == t.alias;
    checks.push_back({t,
                      ssh::checkScript({t.alias, c_.workingDir, forwarded, o.command,
                                        interfaceFor(interfaces_, t.alias),
                                        static_cast<int>(o.grace.count()), ""}),
                      ranks, nullptr});
  }
  ssh::ConnectSlots slots(c_.sshSlots);
  log::logger("launcher")
      ->info("checking {} remote hosts, at most {} at once (--ssh-concurrency)", targets_.size(),
             slots.limit());
  checked_ = ssh::preflight(checks, slots);
  if (!checked_.failures.empty()) {
    std::string text =
        detail::concat("cannot start the job: ", checked_.failures.size(), " of ", targets_.size(),
                       " remote hosts failed the check; nothing "
                       "was started:");
    for (const auto& f : checked_.failures) text += "\n  " + f;
    throw Error(text);
  }
}

HostReach StaticStrategy::reach() {
  HostReach r;
  r.remote = !targets_.empty() || !agentRoutes_.empty();
  r.thisHost = plan_.local.empty() ? "" : *plan_.local.begin();
  r.interface = interfaceFor(interfaces_, r.thisHost);
  for (const auto& t : targets_)
    r.routes.emplace_back(t.alias, checked_.ready.at(t.alias).localAddress);
  for (const auto& route : agentRoutes_) r.routes.push_back(route);
  return r;
}

// torch.distributed's env:// rendezvous, which torchrun gives a script (RANK, WORLD_SIZE and
// LOCAL_RANK are placement variables): MASTER_ADDR, rank 0's host as the other hosts reach it,
// and MASTER_PORT, a port free on this machine now. A value the user set is kept. Not for
// elastic jobs, whose rank 0 moves between rounds.
void StaticStrategy::addTorchRendezvous(Environment& extra,
                                        const std::string& rendezvousAddress) const {
  const RankPlacement& rank0 = placements_.front();
  auto given = [&](const std::string& name) { return userSet(name, c_.base, c_.options.exports); };
  if (!given("MASTER_ADDR")) {
    std::string address = rendezvousAddress;  // this machine's, as every host reaches it
    if (!plan_.local.count(rank0.hostname)) {
      if (!agent_.empty()) address = rank0.hostname;  // the agent's host, as named
      for (const auto& t : targets_)
        if (t.alias == rank0.hostname) address = t.address;
    }
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

RemoteRankSpec StaticStrategy::remoteRank(const RankPlacement& p, const Environment& env,
                                          const std::string& iface, const JobIdentity& job) const {
  ssh::RemoteRun run{p.hostname,
                     c_.workingDir,
                     ssh::forwardedEnvironment(env),
                     c_.options.command,
                     iface,
                     static_cast<int>(c_.options.grace.count()),
                     collectives::shm::jobSegmentPrefix(job.jobId)};
  return {p, p.rank, ssh::runScript(run)};
}

JobStart StaticStrategy::start(rendezvous::RendezvousServer&, const JobIdentity& job,
                               const Environment& common, RemoteRanks& remote) {
  auto log = log::logger("launcher");
  const LaunchOptions& o = c_.options;
  for (const auto& t : targets_)
    log->info("host {}: ssh {}:{} as {}, reached from {}; ranks use {}", t.alias, t.address, t.port,
              t.user, checked_.ready.at(t.alias).localAddress,
              interfaceFor(interfaces_, t.alias).empty()
                  ? std::string("the address that reaches the rendezvous")
                  : "interface " + interfaceFor(interfaces_, t.alias));
  Environment extra = common;
  addTorchRendezvous(extra, job.rendezvousAddr);
  JobStart out;
  std::map<std::string, std::vector<RemoteRankSpec>> remoteByHost;
  for (const auto& p : placements_) {
    Environment env = workerEnvironment(c_.base, p, job, o.exports, extra);
    std::string iface = interfaceFor(interfaces_, p.hostname);
    if (!iface.empty()) env[params::envName(params::ParamId::NetworkInterface)] = iface;
    bool local = plan_.local.count(p.hostname) > 0;
    std::string gloo =
        glooInterface(iface, local, targets_.empty() && agentRoutes_.empty(), job.rendezvousAddr);
    if (!gloo.empty() && !userSet("GLOO_SOCKET_IFNAME", c_.base, o.exports))
      env["GLOO_SOCKET_IFNAME"] = gloo;
    if (!agent_.empty())
      out.local.push_back(agentWorker(agent_, p, std::move(env), o.command));
    else if (local)
      out.local.push_back(localRank(p, std::move(env)));
    else
      remoteByHost[p.hostname].push_back(remoteRank(p, env, iface, job));
    log->info("rank {}: host {} local {}/{} cross {}/{}", p.rank, p.hostname, p.localRank,
              p.localSize, p.crossRank, p.crossSize);
  }
  for (const auto& t : targets_)
    remote.addHost(std::move(checked_.ready.at(t.alias)), std::move(remoteByHost[t.alias]));
  return out;
}

}  // namespace

std::unique_ptr<LaunchStrategy> staticStrategy(const LaunchContext& context) {
  if (!context.options.elastic.cooldownRange.empty())
    throw InvalidArgument(
        "--blacklist-cooldown-range applies to elastic jobs only (give "
        "--min-np, --max-np or --host-discovery-script)");
  return std::make_unique<StaticStrategy>(context);
}

}  // namespace hvd::launcher
