#include "comm/launch_env.h"

#include <cstdlib>

namespace zero {

const char* env_var_name(EnvVar v) {
  switch (v) {
    case EnvVar::SlurmJobId: return "SLURM_JOB_ID";
    case EnvVar::SlurmStepNumTasks: return "SLURM_STEP_NUM_TASKS";
    case EnvVar::SlurmProcId: return "SLURM_PROCID";
    case EnvVar::OmpiWorldSize: return "OMPI_COMM_WORLD_SIZE";
    case EnvVar::OmpiWorldRank: return "OMPI_COMM_WORLD_RANK";
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

namespace {
std::optional<int> first_int(std::initializer_list<EnvVar> vars) {
  for (EnvVar v : vars)
    if (const auto s = read_env(v)) {
      char* end = nullptr;
      const long n = std::strtol(s->c_str(), &end, 10);
      if (end != s->c_str() && *end == '\0' && n >= 0) return int(n);
    }
  return std::nullopt;
}
}  // namespace

std::optional<int> launcher_rank() {
  return first_int({EnvVar::SlurmProcId, EnvVar::OmpiWorldRank, EnvVar::PmixRank});
}

std::optional<int> launcher_world() {
  return first_int({EnvVar::SlurmStepNumTasks, EnvVar::OmpiWorldSize});
}

}  // namespace zero
