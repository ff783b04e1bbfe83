// --launch-agent (HVD_LAUNCH_AGENT): an executable hvdrun runs on this machine in place of each
// worker, as `AGENT HOST COMMAND [ARGS...]`, for clusters whose hosts are reached through their
// own scheduler rather than SSH (hvd.ray's elastic executor starts workers as Ray actors this
// way; Open MPI's plm_rsh_agent plays the same part). Every worker of the job goes through it,
// this machine's included, so the scheduler accounts for all of them.
//
// The agent gets the worker's whole environment, and HVD_LAUNCH_AGENT_ENV names (comma
// separated) the variables it must give the worker where it runs: the ones an SSH start forwards.
// Its stdout and stderr are the worker's output, its exit status the worker's, and SIGTERM (then
// SIGKILL after --grace-seconds) must stop the worker. hvdrun reads nothing else from it.
#pragma once

#include <string>
#include <vector>

#include "launcher/job.h"
#include "launcher/launch_options.h"
#include "launcher/worker_env.h"

namespace hvd::launcher {

// The agent to use, resolved to a path (--launch-agent, else HVD_LAUNCH_AGENT in hvdrun's
// environment); "" when neither is set. Throws InvalidArgument naming the flag when the
// executable is not found.
std::string resolveLaunchAgent(const LaunchOptions& options, const Environment& base);

// What hvdrun starts for the worker placed at `placement` with `env` running `command`.
WorkerSpec agentWorker(const std::string& agent, const RankPlacement& placement, Environment env,
                       const std::vector<std::string>& command);

}  // namespace hvd::launcher
