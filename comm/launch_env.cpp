#include "comm/launch_env.h"

#include <algorithm>
#include <cstdlib>

namespace zero {

const char* env_var_name(EnvVar v) {
  switch (v) {
    case EnvVar::SlurmJobId: return "SLURM_JOB_ID";
    case EnvVar::SlurmStepNumTasks: return "SLURM_STEP_NUM_TASKS";
    case EnvVar::SlurmStepTasksPerNode: return "SLURM_STEP_TASKS_PER_NODE";
    case EnvVar::OmpiLocalSize: return "OMPI_COMM_WORLD_LOCAL_SIZE";
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

std::optional<std::vector<int>> parse_slurm_tasks_per_node(const std::string& s, int64_t max_tasks) {
  std::vector<int> counts;
  int64_t tasks = 0;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string entry = s.substr(pos, comma - pos);  // "8" or "8(x2)"
    char* end = nullptr;
    const long n = std::strtol(entry.c_str(), &end, 10);
    if (end == entry.c_str() || n <= 0) return std::nullopt;
    long reps = 1;
    if (*end != '\0') {
      char* rep_end = nullptr;
      reps = end[0] == '(' && end[1] == 'x' ? std::strtol(end + 2, &rep_end, 10) : 0;
      if (reps <= 0 || rep_end[0] != ')' || rep_end[1] != '\0') return std::nullopt;
    }
    // Both at most max_tasks, so their product cannot overflow: no more tasks than the step has.
    if (n > max_tasks || reps > max_tasks || n * reps > max_tasks - tasks) return std::nullopt;
    tasks += n * reps;
    counts.insert(counts.end(), size_t(reps), int(n));
    pos = comma + 1;
  }
  return counts;
}

std::optional<std::vector<int>> launcher_node_of_rank(int world) {
  std::vector<int> counts;
  if (const auto s = read_env(EnvVar::SlurmStepTasksPerNode); s && !read_env(EnvVar::OmpiWorldSize)) {
    const auto parsed = parse_slurm_tasks_per_node(*s, world);
    if (!parsed) return std::nullopt;
    counts = *parsed;
  } else if (const auto local = first_int({EnvVar::OmpiLocalSize}); local && *local > 0 && world % *local == 0) {
    counts.assign(size_t(world / *local), *local);
  } else {
    return std::nullopt;
  }
  std::vector<int> node_of_rank;
  for (size_t node = 0; node < counts.size(); ++node) node_of_rank.insert(node_of_rank.end(), size_t(counts[node]), int(node));
  if (int(node_of_rank.size()) != world) return std::nullopt;
  return node_of_rank;
}

}  // namespace zero
