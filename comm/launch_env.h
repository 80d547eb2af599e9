// The one place that reads launcher environment variables (Slurm, Open MPI, PMIx, the project's own).
// Everything else asks this table; nothing else calls getenv for these.
#pragma once
#include <optional>
#include <string>

namespace zero {

enum class EnvVar {
  SlurmJobId,      // SLURM_JOB_ID: set under srun/sbatch
  SlurmStepNumTasks, // SLURM_STEP_NUM_TASKS
  SlurmProcId,     // SLURM_PROCID
  OmpiWorldSize,   // OMPI_COMM_WORLD_SIZE: set by mpirun
  OmpiWorldRank,   // OMPI_COMM_WORLD_RANK: set by mpirun
  PmixRank,        // PMIX_RANK: set by PMIx launchers (srun --mpi=pmix, mpirun)
  NumThreads,      // OMP_NUM_THREADS: math threads per rank
  FaultInjection,  // ZERO_FAULT: deterministic fault injection for tests (see checkpoint/)
};

const char* env_var_name(EnvVar v);
std::optional<std::string> read_env(EnvVar v);

// This process's rank and the world size as the launcher set them, before (and without) MPI_Init:
// srun's SLURM_PROCID / SLURM_STEP_NUM_TASKS, mpirun's OMPI_COMM_WORLD_RANK (or PMIX_RANK) /
// OMPI_COMM_WORLD_SIZE. nullopt without a launcher. For work that needs no MPI but must happen once
// per job (help, version, usage errors) or plan for the launched world.
std::optional<int> launcher_rank();
std::optional<int> launcher_world();

}  // namespace zero
