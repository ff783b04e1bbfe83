// hvdrun runs every job through one pipeline (launcher.cc, launch()): check the flags and the
// environment, fork the orphan guardian, choose the rendezvous address, serve the rendezvous,
// run the Job and print its summary, remove what the ranks left in /dev/shm. What a static job
// (-np) and an elastic one (--min-np, --max-np, --host-discovery-script) do differently is a
// LaunchStrategy: which hosts, where the ranks go and how they start, and whether rounds repeat
// (an elastic job's JobPolicy, elastic_driver.h).
//
// A static job is not run as "the elastic driver with one round and no discovery": that would
// change what users see. A static job checks every remote host before any rank starts and
// refuses the job with one report of all failures; its ranks are placed host-major once and
// labelled by rank ("rank 3"), while the driver labels workers by number and renumbers ranks
// each round; its workers get torch's MASTER_ADDR/MASTER_PORT (an elastic job's rank 0 moves)
// and GLOO_SOCKET_IFNAME; and its first failed rank ends the job, where the driver blacklists
// the host and goes on.
//
// Thread model: the main thread calls each member once, in the order declared, and the
// strategy lives until launch() returns.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/rendezvous/rendezvous_server.h"
#include "launcher/job.h"
#include "launcher/launch_options.h"
#include "launcher/remote_ranks.h"
#include "launcher/rendezvous_bind.h"
#include "launcher/worker_env.h"

namespace hvd::launcher {

// What the pipeline settles before it makes a strategy.
struct LaunchContext {
  const LaunchOptions& options;
  Environment base;        // hvdrun's environment, with hvd's Python path
  std::string workingDir;  // the workers' (also on remote hosts)
  std::size_t sshSlots;    // --ssh-concurrency / HVD_SSH_CONCURRENCY
};

// What the strategy hands the Job.
struct JobStart {
  std::vector<WorkerSpec> local;      // ranks on this machine, started by Job::run()
  std::unique_ptr<JobPolicy> policy;  // none: a static job; else the rounds' driver
};

class LaunchStrategy {
 public:
  virtual ~LaunchStrategy() = default;
  // Settings every worker of this kind of job gets beyond the common ones; the pipeline checks
  // -x against them before anything starts.
  virtual void addWorkerParams(Environment& extra) const = 0;
  // After the guardian has forked and before the server starts: what opens threads or SSH
  // connections. Static: the preflight of every remote host (throws one report of all
  // failures, before any rank starts). Elastic: the discovery script's first run and thread.
  virtual void prepare() = 0;
  // What the rendezvous bind rule (rendezvous_bind.h) needs to know of the job's hosts; after
  // prepare().
  virtual HostReach reach() = 0;
  // The job as its first log line names it, before "; rendezvous at ...".
  virtual std::string describe(const JobIdentity& job) const = 0;
  // The most ranks the job runs at once (0: no bound is known, an elastic job without
  // --max-np), for the open files hvdrun needs (common/open_files.h).
  virtual std::size_t mostRanks() const = 0;
  // With the server listening and `job` complete (rendezvousAddr: the bound address): the
  // workers to start, remote ranks added to `remote`. `extra`: the common worker settings
  // with addWorkerParams'.
  virtual JobStart start(rendezvous::RendezvousServer& server, const JobIdentity& job,
                         const Environment& extra, RemoteRanks& remote) = 0;
};

// Both read and check the flags (InvalidArgument) and start nothing.
std::unique_ptr<LaunchStrategy> staticStrategy(const LaunchContext& context);
std::unique_ptr<LaunchStrategy> elasticStrategy(const LaunchContext& context);

}  // namespace hvd::launcher
