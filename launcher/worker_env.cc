#include "launcher/worker_env.h"

#include <regex>

#include "common/error.h"

namespace hvd::launcher {

Environment workerEnvironment(const Environment& base, const RankPlacement& p,
                              const JobIdentity& job, const std::vector<std::string>& exports,
                              const Environment& extra) {
  // What hvdrun sets for each rank: the placement under the HVD_*, HOROVOD_* and torchrun
  // names, the rendezvous, the job's identity and secret.
  std::vector<std::pair<std::string, std::string>> owned;
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
    owned.emplace_back(std::string("HVD_") + name, value);
    owned.emplace_back(std::string("HOROVOD_") + name, value);
  }
  owned.emplace_back("RANK", std::to_string(p.rank));
  owned.emplace_back("WORLD_SIZE", std::to_string(p.size));
  owned.emplace_back("LOCAL_RANK", std::to_string(p.localRank));
  owned.emplace_back("LOCAL_WORLD_SIZE", std::to_string(p.localSize));
  owned.emplace_back("HVD_RENDEZVOUS_ADDR", job.rendezvousAddr);
  owned.emplace_back("HVD_RENDEZVOUS_PORT", std::to_string(job.rendezvousPort));
  owned.emplace_back("HOROVOD_GLOO_RENDEZVOUS_ADDR", job.rendezvousAddr);
  owned.emplace_back("HOROVOD_GLOO_RENDEZVOUS_PORT", std::to_string(job.rendezvousPort));
  owned.emplace_back("HVD_JOB_ID", job.jobId);
  owned.emplace_back("HVD_SECRET", job.secret);

  static const std::regex kName("^[A-Za-z_][A-Za-z0-9_]*$");
  Environment env = base;
  for (const auto& x : exports) {
    auto eq = x.find('=');
    std::string name = x.substr(0, eq);
    if (!std::regex_match(name, kName))
      throw InvalidArgument("-x '" + x + "': '" + name + "' is not a valid variable name");
    for (const auto& o : owned)
      if (o.first == name)
        throw InvalidArgument("-x " + x + ": hvdrun sets " + name +
                              " for each rank itself (placement, rendezvous or job identity); "
                              "it cannot be exported");
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
  for (auto& [k, v] : owned) env[k] = std::move(v);
  return env;
}

}  // namespace hvd::launcher
