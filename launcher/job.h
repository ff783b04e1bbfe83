// Runs one job's ranks and watches them until they all end: the ranks on this machine as child
// processes, the ranks on remote hosts through RemoteRanks. Forwards their output, and
// stops the job at the first failure. The first worker that exits non-zero or dies
// by a signal ends the job: the others get SIGTERM (to their whole process group; a remote
// rank's lifeline ends), then SIGKILL after the grace period. The first SIGINT/SIGTERM to hvdrun
// does the same orderly stop; a second SIGINT kills at once. Thread model: run() is called once, on
// the main thread; it installs signal handlers for the duration.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/rendezvous/failure_reports.h"
#include "launcher/launch_options.h"
#include "launcher/orphan_guardian.h"
#include "launcher/output_forwarder.h"
#include "launcher/rank_assignment.h"
#include "launcher/remote_ranks.h"
#include "launcher/signal_pipe.h"
#include "launcher/worker_env.h"

namespace hvd::launcher {

// One rank to start on this machine.
struct WorkerSpec {
  RankPlacement placement;
  Environment env;
  std::string executable;  // resolved path
  std::vector<std::string> argv;
};

class Job;

// What an elastic job decides that a static one does not (elastic_driver.h): workers join and
// leave while the job runs, and a failed worker need not end the job.
class JobPolicy {
 public:
  virtual ~JobPolicy() = default;
  // Called once the job's event loop runs, then about every kPolicyTick until it stops; may add
  // and stop workers, or fail the job.
  virtual void tick(Job& job) = 0;
  // Worker `label` ended while the job was not stopping. True: the job goes on without it;
  // false: the job stops, reporting this worker's failure (as a static job does).
  virtual bool tolerate(Job& job, int label, const std::string& host, const ExitStatus& status) = 0;
  // True while the job must go on with no worker running (waiting for hosts to appear).
  virtual bool waiting() const = 0;
};

class Job {
 public:
  static constexpr auto kPolicyTick = std::chrono::milliseconds(250);

  // `remote` holds the ranks on other hosts (may be empty, not yet started).
  Job(const LaunchOptions& options, std::vector<WorkerSpec> workers, RemoteRanks& remote,
      OrphanGuardian& guardian);
  ~Job();

  // Returns hvdrun's exit code: 0, the first failed rank's code (128+signal for a signal), or
  // 128+signal when hvdrun itself was interrupted. Prints the failure summary on stderr.
  int run();

  // With a policy the job is elastic: it may start with no workers, its workers are labelled by
  // number ("worker N", the output's [N]) instead of rank, and the policy rules on failures.
  void setPolicy(JobPolicy* policy) { policy_ = policy; }
  // Where the failure summary reads the ranks' failure reports (failure_reports.h): a rank
  // that failed first because a peer had failed is not the summary's headline, the rank whose
  // own failure was reported first is. Without it, the first rank to fail is.
  using ReadFailureReports = std::function<std::vector<rendezvous::FailureReport>()>;
  void setFailureReports(ReadFailureReports read) { readReports_ = std::move(read); }
  // For the policy, from tick() or tolerate(): starts one more local worker and returns its
  // label; starts workers on a remote host (checked first, on a thread of their own; each
  // spec's id is its label, taken with nextLabel()); stops one (SIGTERM, SIGKILL after the grace
  // period); ends the job as failed.
  int addWorker(WorkerSpec spec);
  int nextLabel();
  void addRemoteWorkers(LateHost host);
  void stopWorker(int label);
  void fail(const std::string& reason);

 private:
  struct Worker;
  void spawnAll();
  void eventLoop();
  void handleSignal(int sig);
  void startLocal(WorkerSpec& spec, int label);
  void adoptRemote(const RemoteRankStreams& streams);
  void reapWorkers();
  void collectRemoteEnds();
  void onEnded(std::size_t index, ExitStatus status);
  void readOutput(Worker& w, int stream);
  void beginStop(const std::string& reason);
  void killAll(int sig);
  // The index of the worker the summary headlines, and the ranks that failed because of it.
  void blameFromReports();
  void printSummary() const;
  bool allDone() const;

  const LaunchOptions& options_;
  std::vector<WorkerSpec> specs_;
  RemoteRanks& remote_;
  OrphanGuardian& guardian_;
  std::deque<Worker> workers_;  // grows while references to its workers are held (addWorker)
  std::unique_ptr<OutputForwarder> output_;
  std::unique_ptr<SignalPipe> signals_;  // while run() runs
  JobPolicy* policy_ = nullptr;
  ReadFailureReports readReports_;
  std::vector<rendezvous::FailureReport> peerCaused_;  // blameFromReports()'s
  std::string failReason_;                             // fail()'s
  int lastFailed_ = -1;      // index of the latest worker that failed, for fail()'s summary
  int firstFailure_ = -1;    // index into workers_; -2: no worker, see failReason_
  int interruptSignal_ = 0;  // signal that interrupted hvdrun
  int interrupts_ = 0;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point killDeadline_{};
  std::chrono::steady_clock::time_point drainDeadline_{};
};

}  // namespace hvd::launcher
