#include "launcher/worker_env.h"

#include <regex>

#include "common/error.h"

namespace hvd::launcher {

Environment workerEnvironment(const Environment& base, const RankPlacement& p,
                              const JobIdentity& job, const std::vector<std::string>& exports,
                              const Environment& extra) {
  static const std::regex kName("^[A-Za-z_][A-Za-z0-9_]*$");
  Environment env = base;
  for (const auto& x : exports) {
    auto eq = x.find('=');
    std::string name = x.substr(0, eq);
    if (!std::regex_match(name, kName))
      throw InvalidArgument("-x '" + x + "': '" + name + "' is not a valid variable name");
    if (eq != std::string::npos) {
      env[name] = x.substr(eq + 1);
    } else if (auto it = base.find(name); it != base.end()) {
      env[name] = it->second;
    } else {
      throw InvalidArgument("-x " + name + ": " + name +
                            " is not set in hvdrun's environment (use -x " + name + "=VALUE)");
    }
  }
  for (const auto& [k, v] : extra) env[k] = v;
  const std::pair<const char*, std::string> placement[] = {
      {"RANK", std::to_string(p.rank)},
      {"SIZE", std::to_string(p.size)},
      {"LOCAL_RANK", std::to_string(p.localRank)},
      {"LOCAL_SIZE", std::to_string(p.localSize)},
      {"CROSS_RANK", std::to_string(p.crossRank)},
      {"CROSS_SIZE", std::to_string(p.crossSize)},
      {"HOSTNAME", p.hostname},
  };
  for (const auto& [name, value] : placement) {
    env[std::string("HVD_") + name] = value;
    env[std::string("HOROVOD_") + name] = value;
  }
  env["RANK"] = std::to_string(p.rank);
  env["WORLD_SIZE"] = std::to_string(p.size);
  env["LOCAL_RANK"] = std::to_string(p.localRank);
  env["LOCAL_WORLD_SIZE"] = std::to_string(p.localSize);
  env["HVD_RENDEZVOUS_ADDR"] = job.rendezvousAddr;
  env["HVD_RENDEZVOUS_PORT"] = std::to_string(job.rendezvousPort);
  env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] = job.rendezvousAddr;
  env["HOROVOD_GLOO_RENDEZVOUS_PORT"] = std::to_string(job.rendezvousPort);
  env["HVD_JOB_ID"] = job.jobId;
  env["HVD_SECRET"] = job.secret;
  return env;
}

}  // namespace hvd::launcher
