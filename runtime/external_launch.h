// Ranks started without hvdrun, by srun or mpirun directly (cluster job scripts): their rank,
// size and placement come from the launcher's own variables, turned into the HVD_* ones the
// rest of the runtime reads. Rank 0 then serves the rendezvous itself. What the launcher's
// variables allow is derived too, each only where the job script exports no HVD_* value (see
// docs/cluster.md): the port from the job id (Slurm, Open MPI), the address from the step's
// first node (Slurm), the secret from mpirun's per-job random key (Open MPI).
// Recognised, first match wins: Open MPI (OMPI_COMM_WORLD_*), MPICH/Hydra (PMI_RANK, PMI_SIZE,
// MPI_LOCALRANKID, MPI_LOCALNRANKS), Slurm job steps (SLURM_PROCID, SLURM_STEP_NUM_TASKS,
// SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE). Nothing is read when HVD_RANK or
// HOROVOD_RANK is set (hvdrun started the rank). Pure: works on a copy of the environment.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace hvd::runtime {

struct ExternalLaunch {
  std::string launcher;                       // "Open MPI", "MPICH", "Slurm"
  std::map<std::string, std::string> params;  // HVD_RANK, HVD_SIZE, ... to add
};

// Throws InvalidArgument naming the variable when a recognised launcher's variables are
// inconsistent (rank not below size, missing local size).
std::optional<ExternalLaunch> detectExternalLaunch(const std::map<std::string, std::string>& env);

}  // namespace hvd::runtime
