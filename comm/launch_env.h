// The one place that reads launcher environment variables (Slurm, Open MPI, PMIx, the project's own).
// Everything else asks this table; nothing else calls getenv for these.
#pragma once
#include <optional>
#include <string>

namespace zero {

enum class EnvVar {
  SlurmJobId,      // SLURM_JOB_ID: set under srun/sbatch
  SlurmStepNumTasks, // SLURM_STEP_NUM_TASKS
  SlurmStepTasksPerNode,  // SLURM_STEP_TASKS_PER_NODE: "8(x2)", "8,4", ...
  OmpiLocalSize,   // OMPI_COMM_WORLD_LOCAL_SIZE: set by mpirun (this node's ranks)
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
// The ranks on each node as the launcher placed them, when every node holds the same number: srun's
// SLURM_STEP_TASKS_PER_NODE ("8(x2)": 8; "8,4": nullopt), else mpirun's OMPI_COMM_WORLD_LOCAL_SIZE (this node's).
// nullopt without a launcher. For a plan of the launched job before MPI (zero.shard_ranks node in --dry-run).
std::optional<int> launcher_ranks_per_node();
// SLURM_STEP_TASKS_PER_NODE's format: a comma list of "N" or "N(xK)"; N when every entry has the same N.
std::optional<int> parse_slurm_tasks_per_node(const std::string& s);

}  // namespace zero
