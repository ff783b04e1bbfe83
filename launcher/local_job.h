// Runs one job's workers on this machine and watches them until they all end: forwards their
// output, and stops the job at the first failure. The first worker that exits non-zero or dies
// by a signal ends the job: the others get SIGTERM (to their whole process group), then
// SIGKILL after the grace period. The first SIGINT/SIGTERM to hvdrun does the same orderly
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
#include "launcher/worker_env.h"

namespace hvd::launcher {

// One process to start here: the rank itself, or for a rank on a remote host its SSH relay
// (ssh/ssh_relay.h), which the job watches exactly like a local rank.
struct WorkerSpec {
  RankPlacement placement;
  Environment env;
  std::string executable;  // resolved path
  std::vector<std::string> argv;
  bool viaSsh = false;
};

class LocalJob {
 public:
  LocalJob(const LaunchOptions& options, std::vector<WorkerSpec> workers,
           OrphanGuardian& guardian);
  ~LocalJob();

  // Returns hvdrun's exit code: 0, the first failed rank's code (128+signal for a signal), or
  // 128+signal when hvdrun itself was interrupted. Prints the failure summary on stderr.
  int run();

 private:
  struct Worker;
  void spawnAll();
  void eventLoop();
  void handleSignal(int sig);
  void reapWorkers();
  void readOutput(Worker& w, int stream);
  void beginStop(const std::string& reason);
  void killAll(int sig);
  void printSummary() const;
  bool allDone() const;

  const LaunchOptions& options_;
  std::vector<WorkerSpec> specs_;
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
