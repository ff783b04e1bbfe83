// How an elastic job starts its workers (ElasticDriver's WorkerStarter): on this machine's host
// names as child processes, on other hosts over SSH, each new host checked on a thread of its
// own so that hvdrun's event loop never waits for a login. A host that fails the check ends its
// new workers as unstarted, and the driver blacklists it.
//
// Addresses: hvdrun's store listens where the launch pipeline's bind rule says
// (rendezvous_bind.h): --network-interface's address, else loopback, never every interface. Without
// an interface, a remote host's workers reach it on the address hvdrun's SSH connection to
// that host comes from, which listenOn then makes the store serve too; this machine's workers
// reach it over loopback, so a round that spans hosts tells them the address their peers reach
// them on (the one the kernel routes towards the round's first remote host), unless
// --network-interface chose one.
// With --launch-agent every worker starts as a child process of this machine's agent
// (launch_agent.h); a remote host's workers are told the address the kernel routes towards it.
// Thread model: everything runs on the job's thread, but the SSH check and the making of a
// remote worker's run script, which run on that host's thread and read only copies.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/elastic_driver.h"
#include "launcher/launch_options.h"
#include "launcher/worker_env.h"

namespace hvd::launcher {

struct ElasticLaunch {
  Environment base;  // hvdrun's environment, with hvd's Python path
  JobIdentity job;   // rendezvousAddr: what this machine's workers connect to
  // What remote workers connect to; empty: the address of hvdrun's SSH connection to the host,
  // which listenOn must then make the rendezvous serve.
  std::string remoteRendezvousAddr;
  std::function<void(const std::string&)> listenOn;
  Environment extra;                 // HVD_* settings every worker gets
  std::vector<std::string> exports;  // -x
  std::vector<std::string> command;
  std::string executable;  // command[0] resolved on this machine
  std::string workingDir;
  std::map<std::string, std::string> interfaces;  // parseNetworkInterfaces
  SshOptions ssh;
  std::string agent;  // --launch-agent, resolved: every worker starts through it; "": none
  int graceSeconds = 10;
};

class ElasticWorkers : public WorkerStarter {
 public:
  // `isLocal`: whether a host name is this machine.
  ElasticWorkers(ElasticLaunch launch, std::function<bool(const std::string&)> isLocal);

  rendezvous::elastic::HostAddresses addresses(
      const rendezvous::elastic::Members& members) override;
  void start(Job& job, const rendezvous::elastic::Members& added) override;

 private:
  std::shared_ptr<const ElasticLaunch> launch_;  // shared with the remote hosts' threads
  std::function<bool(const std::string&)> isLocal_;
  // The address `remote`'s workers reach this machine on ("" when no route is known).
  std::string routeSourceTowards(const std::string& remote);
  void startThroughAgent(Job& job, const rendezvous::elastic::Members& added);

  std::map<std::string, std::string> routeSource_;  // remote host -> this machine's address
};

}  // namespace hvd::launcher
