#include "comm/launch_env.h"

#include <cstdlib>

namespace zero {

const char* env_var_name(EnvVar v) {
  switch (v) {
    case EnvVar::SlurmJobId: return "SLURM_JOB_ID";
    case EnvVar::SlurmStepNumTasks: return "SLURM_STEP_NUM_TASKS";
    case EnvVar::SlurmProcId: return "SLURM_PROCID";
    case EnvVar::OmpiWorldSize: return "OMPI_COMM_WORLD_SIZE";
    case EnvVar::PmixRank: return "PMIX_RANK";
    case EnvVar::NumThreads: return "OMP_NUM_THREADS";
    case EnvVar::FaultInjection: return "ZERO_FAULT";
  }
  return "";
}

std::optional<std::string> read_env(EnvVar v) {
  const char* s = std::getenv(env_var_name(v));
  if (!s) return std::nullopt;
  return std::string(s);
}

}  // namespace zero
