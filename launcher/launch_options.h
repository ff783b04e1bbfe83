// What hvdrun was asked to do, after CLI parsing (apps/hvdrun) and before anything starts.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/remote_hosts.h"

namespace hvd::launcher {

// The elastic flags as given (-1 / empty: not given).
struct ElasticFlags {
  int minNp = -1;
  int maxNp = -1;
  std::string discoveryScript;
  int slotsPerHost = 1;
  std::chrono::seconds timeout{600};
  bool timeoutGiven = false;
  int resetLimit = -1;
  std::vector<int> cooldownRange;  // --blacklist-cooldown-range MIN MAX; empty: not given
  // The next two, when not given, come from hvdrun's environment (their HVD_* variables).
  int hostFailureLimit = 0;             // --blacklist-failure-limit; 0: not given
  std::optional<bool> requireProgress;  // --elastic-require-progress
  std::string commitDir;                // --elastic-commit-dir (also passed to the workers)
  bool requested() const { return minNp > 0 || maxNp > 0 || !discoveryScript.empty(); }
};

struct LaunchOptions {
  int np = -1;           // -1: not given (taken from a Slurm allocation, else an error)
  std::string hosts;     // -H
  std::string hostfile;  // --hostfile; with neither, Slurm's allocation or localhost:np
  std::vector<std::string> command;
  std::vector<std::string> exports;  // -x
  std::chrono::seconds startTimeout{30};
  std::chrono::seconds grace{10};
  std::string outputDir;
  bool prefixTimestamp = false;  // --prefix-timestamp
  std::string logLevel = "warn";
  bool verbose = false;
  // HVD_* runtime knobs from flags and --config-file (runtime_flags.h), exported to workers.
  std::map<std::string, std::string> runtimeParams;
  // Put hvd's `horovod` compatibility package on the workers' PYTHONPATH (--horovod-compat or
  // HVD_HOROVOD_COMPAT=1, merged by hvdrun's main).
  bool horovodCompat = false;
  SshOptions ssh;
  // --network-interface: "IFACE" or "host=IFACE,..." (remote_hosts.h); empty: automatic.
  std::string networkInterface;
  // --launch-agent (launch_agent.h); empty: HVD_LAUNCH_AGENT in hvdrun's environment, else none.
  std::string launchAgent;
  ElasticFlags elastic;
};

}  // namespace hvd::launcher
