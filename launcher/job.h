// Runs one job's ranks and watches them until they all end: the ranks on this machine as child
// processes, the ranks on remote hosts through ssh::RemoteRanks. Forwards their output, and
// stops the job at the first failure. The first worker that exits non-zero or dies
// by a signal ends the job: the others get SIGTERM (to their whole process group; a remote
// rank's lifeline ends), then SIGKILL after the grace period. The first SIGINT/SIGTERM to hvdrun does the same orderly
// stop; a second SIGINT kills at once.
// Thread model: run() is called once, on the main thread; it installs signal handlers for the
// duration.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launcher/launch_options.h"
#include "launcher/orphan_guardian.h"
#include "launcher/output_forwarder.h"
#include "launcher/rank_assignment.h"
#include "launcher/signal_pipe.h"
#include "launcher/ssh/remote_ranks.h"
#include "launcher/worker_env.h"

namespace hvd::launcher {

// One rank to start on this machine.
struct WorkerSpec {
  RankPlacement placement;
  Environment env;
  std::string executable;  // resolved path
  std::vector<std::string> argv;
};

class Job {
 public:
  // `remote` holds the ranks on other hosts (may be empty, not yet started).
  Job(const LaunchOptions& options, std::vector<WorkerSpec> workers, ssh::RemoteRanks& remote,
      OrphanGuardian& guardian);
  ~Job();

  // Returns hvdrun's exit code: 0, the first failed rank's code (128+signal for a signal), or
  // 128+signal when hvdrun itself was interrupted. Prints the failure summary on stderr.
  int run();

 private:
  struct Worker;
  void spawnAll();
  void eventLoop();
  void handleSignal(int sig);
  void reapWorkers();
  void collectRemoteEnds();
  void onEnded(std::size_t index, ExitStatus status);
  void readOutput(Worker& w, int stream);
  void beginStop(const std::string& reason);
  void killAll(int sig);
  void printSummary() const;
  bool allDone() const;

  const LaunchOptions& options_;
  std::vector<WorkerSpec> specs_;
  ssh::RemoteRanks& remote_;
  OrphanGuardian& guardian_;
  std::vector<Worker> workers_;
  std::unique_ptr<OutputForwarder> output_;
  std::unique_ptr<SignalPipe> signals_;  // while run() runs
  int firstFailure_ = -1;     // rank
  int interruptSignal_ = 0;   // signal that interrupted hvdrun
  int interrupts_ = 0;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point killDeadline_{};
  std::chrono::steady_clock::time_point drainDeadline_{};
};

}  // namespace hvd::launcher
