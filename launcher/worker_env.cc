#include "launcher/worker_env.h"

#include <regex>

#include "common/error.h"
#include "common/param_table.h"

namespace hvd::launcher {

Environment workerEnvironment(const Environment& base, const RankPlacement& p,
                              const JobIdentity& job, const std::vector<std::string>& exports,
                              const Environment& extra) {
  // What hvdrun sets for each rank: the placement under the HVD_*, HOROVOD_* and torchrun
  // names, the rendezvous, the job's identity and secret (each under its Horovod name too, where
  // the parameter table gives one).
  std::vector<std::pair<std::string, std::string>> owned;
  using params::ParamId;
  const std::pair<ParamId, std::string> settings[] = {
      {ParamId::Rank, std::to_string(p.rank)},
      {ParamId::Size, std::to_string(p.size)},
      {ParamId::LocalRank, std::to_string(p.localRank)},
      {ParamId::LocalSize, std::to_string(p.localSize)},
      {ParamId::CrossRank, std::to_string(p.crossRank)},
      {ParamId::CrossSize, std::to_string(p.crossSize)},
      {ParamId::Hostname, p.hostname},
      {ParamId::RendezvousAddr, job.rendezvousAddr},
      {ParamId::RendezvousPort, std::to_string(job.rendezvousPort)},
      {ParamId::JobId, job.jobId},
      {ParamId::Secret, job.secret},
      // hvdrun serves the rendezvous: a value inherited from a Spark task or Ray actor that
      // started hvdrun would make rank 0 serve one too.
      {ParamId::ExternalLauncher, ""},
  };
  for (const auto& [id, value] : settings) {
    const params::ParamSpec& spec = params::spec(id);
    owned.emplace_back(spec.name, value);
    if (!spec.horovodAlias.empty()) owned.emplace_back(spec.horovodAlias, value);
  }
  owned.emplace_back("RANK", std::to_string(p.rank));
  owned.emplace_back("WORLD_SIZE", std::to_string(p.size));
  owned.emplace_back("LOCAL_RANK", std::to_string(p.localRank));
  owned.emplace_back("LOCAL_WORLD_SIZE", std::to_string(p.localSize));

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
