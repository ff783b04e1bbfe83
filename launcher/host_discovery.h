// --host-discovery-script: an executable that prints the hosts an elastic job may use now, one
// per line, "host" or "host:slots" (Horovod's format). hvdrun runs it once before the job starts
// (a failure refuses the job) and then every second on a thread of its own, keeping the last
// good answer when a later run fails.
#pragma once

#include <sys/types.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/host_spec.h"
#include "launcher/worker_env.h"

namespace hvd::launcher {

// Throws InvalidArgument naming the script and the offending line. A line without slots gets
// `defaultSlots`; blank lines and lines starting with '#' are skipped.
std::vector<HostSlots> parseDiscoveredHosts(const std::string& output, int defaultSlots,
                                            const std::string& script);

// Runs the script once; throws Error naming the script with its exit status and stderr, or
// TimeoutError when it runs past `timeout` (it is then killed).
std::vector<HostSlots> runDiscoveryScript(const std::string& script, int defaultSlots,
                                          const Environment& env, std::chrono::milliseconds timeout,
                                          std::atomic<pid_t>* running = nullptr);

class HostDiscovery {
 public:
  HostDiscovery(std::string script, int defaultSlots, Environment env,
                std::chrono::milliseconds interval);
  ~HostDiscovery();  // stops the thread, killing a script that runs
  // The first answer, from the constructor's own run (which throws on failure).
  const std::vector<HostSlots>& initial() const { return initial_; }
  // The newest good answer.
  std::vector<HostSlots> latest();

 private:
  void loop();
  std::string script_;
  int defaultSlots_;
  Environment env_;
  std::chrono::milliseconds interval_;
  std::vector<HostSlots> initial_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<HostSlots> latest_;
  std::string lastError_;           // logged once per distinct error
  std::atomic<pid_t> running_{-1};  // the script's pid while it runs
  std::thread thread_;
};

}  // namespace hvd::launcher
