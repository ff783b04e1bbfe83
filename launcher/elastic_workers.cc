#include "launcher/elastic_workers.h"

#include "collectives/transport/shm/shm_cleanup.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/param_table.h"
#include "launcher/job.h"
#include "launcher/launch_agent.h"
#include "launcher/remote_hosts.h"
#include "launcher/ssh/remote_command.h"

namespace hvd::launcher {
namespace {

Environment environmentOf(const ElasticLaunch& launch, int id, const RankPlacement& placement,
                          const std::string& rendezvousAddr) {
  JobIdentity job = launch.job;
  job.rendezvousAddr = rendezvousAddr;
  Environment env = workerEnvironment(launch.base, placement, job, launch.exports, launch.extra);
  env[params::envName(params::ParamId::WorkerId)] = std::to_string(id);
  std::string iface = interfaceFor(launch.interfaces, placement.hostname);
  if (!iface.empty()) env[params::envName(params::ParamId::NetworkInterface)] = iface;
  return env;
}

ssh::RemoteRun remoteRun(const ElasticLaunch& launch, const std::string& host, Environment env) {
  return {host,
          launch.workingDir,
          ssh::forwardedEnvironment(env),
          launch.command,
          interfaceFor(launch.interfaces, host),
          launch.graceSeconds,
          collectives::shm::jobSegmentPrefix(launch.job.jobId)};
}

}  // namespace

ElasticWorkers::ElasticWorkers(ElasticLaunch launch,
                               std::function<bool(const std::string&)> isLocal)
    : launch_(std::make_shared<const ElasticLaunch>(std::move(launch))),
      isLocal_(std::move(isLocal)) {}

rendezvous::elastic::HostAddresses ElasticWorkers::addresses(
    const rendezvous::elastic::Members& members) {
  std::string remote;
  for (const auto& [id, p] : members)
    if (!isLocal_(p.hostname)) {
      remote = p.hostname;
      break;
    }
  rendezvous::elastic::HostAddresses out;
  if (remote.empty()) return out;  // one machine: loopback serves
  std::string source = routeSourceTowards(remote);
  if (source.empty()) return out;
  for (const auto& [id, p] : members)
    if (isLocal_(p.hostname) && interfaceFor(launch_->interfaces, p.hostname).empty())
      out[p.hostname] = source;
  return out;
}

std::string ElasticWorkers::routeSourceTowards(const std::string& remote) {
  auto source = routeSource_.find(remote);
  if (source == routeSource_.end()) {
    try {
      source = routeSource_.emplace(remote, net::sourceAddressTowards(remote)).first;
    } catch (const Error& e) {
      // Its workers fail to start the same way (the SSH check, or the rendezvous out of
      // reach), and the driver takes the host out.
      log::logger("launcher")->warn("elastic: {}", e.what());
      return "";
    }
  }
  return source->second;
}

void ElasticWorkers::startThroughAgent(Job& job, const rendezvous::elastic::Members& added) {
  for (const auto& [id, p] : added) {
    std::string rendezvous = launch_->job.rendezvousAddr;
    if (!isLocal_(p.hostname)) {
      rendezvous = launch_->remoteRendezvousAddr;
      if (rendezvous.empty()) rendezvous = routeSourceTowards(p.hostname);
      if (rendezvous.empty()) rendezvous = launch_->job.rendezvousAddr;  // fails, and says so
      launch_->listenOn(rendezvous);
    }
    Environment env = environmentOf(*launch_, id, p, rendezvous);
    int label = job.addWorker(agentWorker(launch_->agent, p, std::move(env), launch_->command));
    HVD_ENFORCE(label == id, "elastic: worker ", id, " got output stream ", label);
  }
}

void ElasticWorkers::start(Job& job, const rendezvous::elastic::Members& added) {
  if (!launch_->agent.empty()) return startThroughAgent(job, added);
  // Labels are handed out in id order, whatever host a worker goes to.
  std::map<std::string, LateHost> remote;
  std::vector<std::string> remoteOrder;
  for (const auto& [id, p] : added) {
    if (isLocal_(p.hostname)) {
      Environment env = environmentOf(*launch_, id, p, launch_->job.rendezvousAddr);
      int label = job.addWorker({p, env, launch_->executable, launch_->command});
      HVD_ENFORCE(label == id, "elastic: worker ", id, " got output stream ", label);
      continue;
    }
    int label = job.nextLabel();
    HVD_ENFORCE(label == id, "elastic: worker ", id, " got output stream ", label);
    auto [it, fresh] = remote.try_emplace(p.hostname);
    if (fresh) remoteOrder.push_back(p.hostname);
    it->second.ranks.push_back({p, id, ""});
  }
  for (const auto& host : remoteOrder) {
    LateHost& late = remote.at(host);
    late.check.target =
        sshTargetFor({host, static_cast<int>(late.ranks.size())}, launch_->ssh, launch_->base);
    late.check.checkScript = ssh::checkScript(remoteRun(*launch_, host, launch_->base));
    late.check.ranks = late.ranks.size();
    late.scriptFor = [launch = launch_](const RemoteRankSpec& rank,
                                        const std::string& localAddress) {
      std::string rendezvous = launch->remoteRendezvousAddr;
      if (rendezvous.empty()) {
        rendezvous = localAddress;
        launch->listenOn(rendezvous);
      }
      return ssh::runScript(remoteRun(*launch, rank.placement.hostname,
                                      environmentOf(*launch, rank.id, rank.placement, rendezvous)));
    };
    job.addRemoteWorkers(std::move(late));
  }
}

}  // namespace hvd::launcher
