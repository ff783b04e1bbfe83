// An elastic job (--min-np, --max-np, --host-discovery-script): hvdrun's driver
// (elastic_driver.h) forms rounds from the hosts offered, starts and replaces the workers, on
// this machine and over SSH (elastic_workers.h), each new remote host checked as it joins.

#include <algorithm>
#include <map>

#include "collectives/rendezvous/tcp_store_client.h"
#include "common/error.h"
#include "common/network.h"
#include "common/params.h"
#include "launcher/elastic_driver.h"
#include "launcher/elastic_workers.h"
#include "launcher/host_discovery.h"
#include "launcher/host_plan.h"
#include "launcher/launch_agent.h"
#include "launcher/launch_strategy.h"
#include "launcher/local_spawner.h"
#include "launcher/remote_hosts.h"

namespace hvd::launcher {
namespace {

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
  e.commitDir = f.commitDir;
  if (!f.cooldownRange.empty()) {
    auto [lo, hi] = std::pair{f.cooldownRange.at(0), f.cooldownRange.at(1)};
    if (hi < lo)
      throw InvalidArgument(detail::concat("--blacklist-cooldown-range ", lo, " ", hi,
                                           ": the maximum is below the minimum"));
    e.cooldown = CooldownRange{std::chrono::seconds(lo), std::chrono::seconds(hi)};
  }
  return e;
}

// The running job's rounds: the driver and what it talks through, destroyed with the Job's
// policy (before the rendezvous server its store client is connected to).
class ElasticRun : public JobPolicy {
 public:
  ElasticRun(const ElasticOptions& options, HostSource hosts, bool fixedHosts, ElasticLaunch launch,
             std::function<bool(const std::string&)> isLocal, std::chrono::seconds connectTimeout)
      : jobId_(launch.job.jobId),
        store_(launch.job.rendezvousAddr, launch.job.rendezvousPort, launch.job.secret,
               connectTimeout),
        workers_(std::move(launch), std::move(isLocal)),
        driver_(options, std::move(hosts), fixedHosts, workers_, store_, jobId_) {}
  void tick(Job& job) override { driver_.tick(job); }
  bool tolerate(Job& job, int label, const std::string& host, const ExitStatus& s) override {
    return driver_.tolerate(job, label, host, s);
  }
  bool waiting() const override { return driver_.waiting(); }

 private:
  std::string jobId_;
  rendezvous::TcpStoreClient store_;
  ElasticWorkers workers_;
  ElasticDriver driver_;
};

class ElasticStrategy : public LaunchStrategy {
 public:
  explicit ElasticStrategy(const LaunchContext& c);
  void addWorkerParams(Environment& extra) const override;
  void prepare() override;
  HostReach reach() override;
  std::string describe(const JobIdentity& job) const override {
    return detail::concat("elastic job ", job.jobId, ": --min-np ", options_.minNp, " --max-np ",
                          options_.maxNp);
  }
  std::size_t mostRanks() const override {
    return options_.maxNp > 0 ? static_cast<std::size_t>(options_.maxNp) : 0;
  }
  JobStart start(rendezvous::RendezvousServer& server, const JobIdentity& job,
                 const Environment& extra, RemoteRanks& remote) override;

 private:
  bool isLocal(const std::string& host);

  LaunchContext c_;
  ElasticOptions options_;
  std::string script_;            // --host-discovery-script, resolved; "": a fixed list
  std::vector<HostSlots> fixed_;  // the fixed list
  std::map<std::string, std::string> interfaces_;
  std::string executable_;  // command[0] on this machine, when workers may run here
  std::string agent_;       // --launch-agent, resolved; "": none
  std::map<std::string, bool> localCache_;
  std::unique_ptr<HostDiscovery> discovery_;
};

ElasticStrategy::ElasticStrategy(const LaunchContext& c) : c_(c) {
  const LaunchOptions& o = c.options;
  const ElasticFlags& flags = o.elastic;
  if (!flags.discoveryScript.empty() && (!o.hosts.empty() || !o.hostfile.empty()))
    throw InvalidArgument("give either --host-discovery-script or -H/--hostfile, not both");
  options_ = elasticOptions(o);
  // Flags win; else hvdrun's environment (checked as the table says). The workers read the
  // commit directory from their environment too; hvdrun's messages name it.
  auto fromEnv = params::ParamValues::fromMap(c.base);
  options_.hostFailureLimit =
      flags.hostFailureLimit > 0
          ? flags.hostFailureLimit
          : static_cast<int>(fromEnv.getInt(params::ParamId::ElasticHostFailureLimit));
  options_.requireProgress =
      flags.requireProgress.value_or(fromEnv.getInt(params::ParamId::ElasticRequireProgress) == 1);
  if (options_.commitDir.empty())
    options_.commitDir = fromEnv.getString(params::ParamId::ElasticCommitDir);
  if (!flags.discoveryScript.empty()) script_ = resolveExecutable(flags.discoveryScript, c.base);
  if (script_.empty()) {
    HostPlan plan = planHosts(o, c.base);
    fixed_ = plan.hosts;
    if (plan.defaulted) fixed_ = {{"localhost", std::max(options_.minNp, options_.maxNp)}};
  } else if (o.networkInterface.find('=') != std::string::npos) {
    throw InvalidArgument("--network-interface '" + o.networkInterface +
                          "': with "
                          "--host-discovery-script, give one interface for every host");
  }
  interfaces_ = parseNetworkInterfaces(o.networkInterface, fixed_);
  // Workers on this machine run the program found here; with no local host in a fixed list,
  // the remote hosts' checks look for it.
  bool localPossible =
      !script_.empty() || std::any_of(fixed_.begin(), fixed_.end(),
                                      [&](const HostSlots& h) { return isLocal(h.host); });
  agent_ = resolveLaunchAgent(o, c.base);
  if (localPossible && agent_.empty()) executable_ = resolveExecutable(o.command[0], c.base);
}

bool ElasticStrategy::isLocal(const std::string& host) {
  auto it = localCache_.find(host);
  if (it == localCache_.end())
    it = localCache_.emplace(host, net::isThisMachine(host, net::resolve(host))).first;
  return it->second;
}

void ElasticStrategy::addWorkerParams(Environment& extra) const {
  extra[params::envName(params::ParamId::Elastic)] = "1";
  if (c_.options.elastic.timeoutGiven)
    extra[params::envName(params::ParamId::ElasticTimeout)] =
        std::to_string(c_.options.elastic.timeout.count());
}

void ElasticStrategy::prepare() {
  if (!script_.empty())
    discovery_ = std::make_unique<HostDiscovery>(script_, c_.options.elastic.slotsPerHost, c_.base,
                                                 std::chrono::seconds(1));
}

// No remote host is known before the server starts: each is checked as it joins, and the
// server then also listens on the address hvdrun reaches it from (start(), listenOn).
HostReach ElasticStrategy::reach() {
  HostReach r;
  r.remote = !script_.empty();
  for (const auto& h : fixed_) {
    if (r.remote && !r.thisHost.empty()) break;  // the rest would tell nothing new
    bool local = isLocal(h.host);
    if (!local) r.remote = true;
    if (local && r.thisHost.empty()) r.thisHost = h.host;
  }
  r.interface = interfaceFor(interfaces_, r.thisHost);
  return r;
}

JobStart ElasticStrategy::start(rendezvous::RendezvousServer& server, const JobIdentity& job,
                                const Environment& extra, RemoteRanks&) {
  const LaunchOptions& o = c_.options;
  ElasticLaunch launch;
  launch.base = c_.base;
  launch.exports = o.exports;
  launch.command = o.command;
  launch.workingDir = c_.workingDir;
  launch.interfaces = interfaces_;
  launch.ssh = o.ssh;
  launch.graceSeconds = static_cast<int>(o.grace.count());
  launch.executable = executable_;
  launch.agent = agent_;
  launch.extra = extra;
  launch.job = job;
  if (!net::isLoopback(job.rendezvousAddr)) launch.remoteRendezvousAddr = job.rendezvousAddr;
  launch.listenOn = [&server](const std::string& address) {
    if (!net::isLoopback(address)) server.listenAlso(address);
  };
  HostSource hosts = [fixed = fixed_] { return fixed; };
  if (discovery_) hosts = [d = discovery_.get()] { return d->latest(); };
  JobStart out;
  out.policy = std::make_unique<ElasticRun>(
      options_, std::move(hosts), script_.empty(), std::move(launch),
      [this](const std::string& h) { return isLocal(h); }, o.startTimeout);
  return out;
}

}  // namespace

std::unique_ptr<LaunchStrategy> elasticStrategy(const LaunchContext& context) {
  return std::make_unique<ElasticStrategy>(context);
}

}  // namespace hvd::launcher
