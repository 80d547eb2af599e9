// The one place that reads launcher environment variables (Slurm, Open MPI, PMIx, the project's own).
// Everything else asks this table; nothing else calls getenv for these.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
// The node of each of the launched ranks (index: rank; equal values: one node), as the launcher will place them,
// before MPI: srun's SLURM_STEP_TASKS_PER_NODE in blocks of consecutive ranks (srun's default distribution; a
// step started with --distribution=cyclic deals them round-robin, SLURM_STEP_TASKS_PER_NODE does not say so),
// else blocks of mpirun's OMPI_COMM_WORLD_LOCAL_SIZE (this node's count; mpirun --map-by slot). nullopt
// without a launcher, or when the launcher's counts do not add up to `world`. For a plan of the launched job
// (zero.shard_ranks node in --dry-run), read as the run reads MPI's table (comm/hybrid_groups.h).
std::optional<std::vector<int>> launcher_node_of_rank(int world);
// SLURM_STEP_TASKS_PER_NODE's format: a comma list of "N" or "N(xK)" (K nodes of N): the count of each node in
// order ("8(x2),4": 8, 8, 4); nullopt when malformed or when the counts add up to more than max_tasks (the step's
// tasks: a corrupt K is refused before it is expanded).
std::optional<std::vector<int>> parse_slurm_tasks_per_node(const std::string& s, int64_t max_tasks);

}  // namespace zero
