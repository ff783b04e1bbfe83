#include "launcher/launch_agent.h"

#include "common/error.h"
#include "common/param_table.h"
#include "common/params.h"
#include "launcher/local_spawner.h"
#include "launcher/ssh/remote_command.h"

namespace hvd::launcher {

std::string resolveLaunchAgent(const LaunchOptions& options, const Environment& base) {
  std::string agent = options.launchAgent;
  std::string source = "--launch-agent";
  if (agent.empty()) {
    agent = params::ParamValues::fromMap(base).getString(params::ParamId::LaunchAgent);
    source = params::envName(params::ParamId::LaunchAgent);
  }
  if (agent.empty()) return "";
  try {
    return resolveExecutable(agent, base);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(source + ": " + e.what());
  }
}

WorkerSpec agentWorker(const std::string& agent, const RankPlacement& placement, Environment env,
                       const std::vector<std::string>& command) {
  std::string names;
  for (const auto& [name, value] : ssh::forwardedEnvironment(env))
    names += (names.empty() ? "" : ",") + name;
  env[params::envName(params::ParamId::LaunchAgentEnv)] = names;
  std::vector<std::string> argv{agent, placement.hostname};
  argv.insert(argv.end(), command.begin(), command.end());
  return {placement, std::move(env), agent, std::move(argv)};
}

}  // namespace hvd::launcher
