#include "runtime/external_launch.h"

#include "common/error.h"
#include "common/params.h"
#include "common/slurm_lists.h"

namespace hvd::runtime {
namespace {

using Env = std::map<std::string, std::string>;
using params::ParamId;
const std::string& variable(ParamId id) { return params::envName(id); }

const std::string* find(const Env& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

int intOf(const Env& env, const std::string& name, int min = 0) {
  const std::string* v = find(env, name);
  if (!v) throw InvalidArgument(name + " is not set");
  return static_cast<int>(params::parseInt(*v, min, 1 << 30, name));
}

// Launchers that give each rank its node-local rank and size but no node index: ranks are
// assumed placed in blocks of equal size per node (mpirun's default by-slot mapping).
ExternalLaunch blockPlaced(const std::string& launcher, int rank, int size, int localRank,
                           int localSize, const std::string& sizeName) {
  if (rank >= size)
    throw InvalidArgument(
        detail::concat(launcher, ": rank ", rank, " is not below ", sizeName, "=", size));
  int nodes = (size + localSize - 1) / localSize;
  return {launcher,
          {{variable(ParamId::Rank), std::to_string(rank)},
           {variable(ParamId::Size), std::to_string(size)},
           {variable(ParamId::LocalRank), std::to_string(localRank)},
           {variable(ParamId::LocalSize), std::to_string(localSize)},
           {variable(ParamId::CrossRank), std::to_string(rank / localSize)},
           {variable(ParamId::CrossSize), std::to_string(nodes)}}};
}

// A rendezvous port every rank of one job derives alike from the launcher's job id, in a range
// below Linux's ephemeral ports (32768+), so that job scripts need not pick one. Two jobs on one
// node meet only when their ids agree modulo the span; rank 0 then fails naming the port.
constexpr int64_t kDerivedPortBase = 20000;
constexpr int64_t kDerivedPortSpan = 10000;

std::string derivedPort(uint64_t jobKey) {
  return std::to_string(kDerivedPortBase + static_cast<int64_t>(jobKey % kDerivedPortSpan));
}

uint64_t numberOf(const std::string& text, const std::string& name) {
  return static_cast<uint64_t>(params::parseInt(text, 0, int64_t{1} << 62, name));
}

ExternalLaunch fromSlurm(const Env& env) {
  int rank = intOf(env, "SLURM_PROCID");
  int size = intOf(env, "SLURM_STEP_NUM_TASKS", 1);
  int localRank = intOf(env, "SLURM_LOCALID");
  int node = intOf(env, "SLURM_NODEID");
  const std::string* perNode = find(env, "SLURM_STEP_TASKS_PER_NODE");
  if (!perNode) perNode = find(env, "SLURM_TASKS_PER_NODE");
  if (!perNode) throw InvalidArgument("SLURM_STEP_TASKS_PER_NODE is not set");
  auto counts = slurm::expandTasksPerNode(*perNode);
  if (node >= static_cast<int>(counts.size()))
    throw InvalidArgument(detail::concat("SLURM_NODEID=", node, " but SLURM_STEP_TASKS_PER_NODE='",
                                         *perNode, "' lists ", counts.size(), " nodes"));
  if (rank >= size || localRank >= counts[node])
    throw InvalidArgument(detail::concat("Slurm: SLURM_PROCID=", rank, " SLURM_LOCALID=", localRank,
                                         " do not fit SLURM_STEP_NUM_TASKS=", size, " and ",
                                         counts[node], " tasks on node ", node));
  // Cross rank: this node's index among the nodes that have a rank with this local rank.
  int crossRank = 0, crossSize = 0;
  for (int i = 0; i < static_cast<int>(counts.size()); ++i)
    if (counts[i] > localRank) {
      if (i < node) ++crossRank;
      ++crossSize;
    }
  ExternalLaunch out{"Slurm",
                     {{variable(ParamId::Rank), std::to_string(rank)},
                      {variable(ParamId::Size), std::to_string(size)},
                      {variable(ParamId::LocalRank), std::to_string(localRank)},
                      {variable(ParamId::LocalSize), std::to_string(counts[node])},
                      {variable(ParamId::CrossRank), std::to_string(crossRank)},
                      {variable(ParamId::CrossSize), std::to_string(crossSize)}}};
  if (const std::string* job = find(env, "SLURM_JOB_ID")) {
    const std::string* step = find(env, "SLURM_STEP_ID");
    out.params[variable(ParamId::JobId)] = "slurm-" + *job + "." + (step ? *step : "0");
    // Concurrent steps of one job (srun ... & srun ...) get ports of their own.
    uint64_t stepNumber = step ? numberOf(*step, "SLURM_STEP_ID") % 16 : 0;
    out.params[variable(ParamId::RendezvousPort)] =
        derivedPort(numberOf(*job, "SLURM_JOB_ID") * 16 + stepNumber);
  }
  // Task 0 runs on the step's first node in every distribution but "arbitrary" (-w lists).
  if (const std::string* nodes = find(env, "SLURM_STEP_NODELIST")) {
    auto names = slurm::expandNodeList(*nodes);
    if (!names.empty()) out.params[variable(ParamId::RendezvousAddr)] = names.front();
  }
  if (const std::string* name = find(env, "SLURMD_NODENAME"))
    out.params[variable(ParamId::Hostname)] = *name;
  return out;
}

}  // namespace

std::optional<ExternalLaunch> detectExternalLaunch(const Env& env) {
  if (find(env, variable(ParamId::Rank)) || find(env, params::spec(ParamId::Rank).horovodAlias))
    return std::nullopt;
  if (find(env, "OMPI_COMM_WORLD_RANK")) {
    auto out =
        blockPlaced("Open MPI", intOf(env, "OMPI_COMM_WORLD_RANK"),
                    intOf(env, "OMPI_COMM_WORLD_SIZE", 1), intOf(env, "OMPI_COMM_WORLD_LOCAL_RANK"),
                    intOf(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1), "OMPI_COMM_WORLD_SIZE");
    if (const std::string* job = find(env, "OMPI_MCA_ess_base_jobid")) {
      out.params[variable(ParamId::JobId)] = "ompi-" + *job;
      out.params[variable(ParamId::RendezvousPort)] =
          derivedPort(numberOf(*job, "OMPI_MCA_ess_base_jobid"));
    }
    // mpirun hands every rank of the job 128 random bits (for transports to agree on a key);
    // nothing outside the job's processes sees them, as with an exported HVD_SECRET.
    if (const std::string* key = find(env, "OMPI_MCA_orte_precondition_transports"))
      out.params[variable(ParamId::Secret)] = "ompi-" + *key;
    return out;
  }
  if (find(env, "PMI_RANK")) {
    if (!find(env, "MPI_LOCALRANKID"))
      throw InvalidArgument(
          "MPICH: PMI_RANK is set but MPI_LOCALRANKID is not (start with "
          "mpiexec from MPICH's Hydra, or set HVD_RANK and friends)");
    return blockPlaced("MPICH", intOf(env, "PMI_RANK"), intOf(env, "PMI_SIZE", 1),
                       intOf(env, "MPI_LOCALRANKID"), intOf(env, "MPI_LOCALNRANKS", 1), "PMI_SIZE");
  }
  // The batch script itself also sees SLURM_PROCID; only a job step (srun) has a step size.
  if (find(env, "SLURM_PROCID") && find(env, "SLURM_STEP_NUM_TASKS")) return fromSlurm(env);
  return std::nullopt;
}

}  // namespace hvd::runtime
