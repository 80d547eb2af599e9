// `pmtrain plan`: for each ZeRO stage, world size and GPU memory size, every per-rank component, the
// predicted peak, whether it fits, the largest micro-batch that fits with the accumulation reaching the
// global batch, the bytes each rank puts on the wire per step, and predicted step and epoch times; one
// recommendation line per (world, memory); a table or --json; --sbatch writes a Slurm script for it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::pmtrain {

struct ConfigArgs;

struct PlanArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string worlds;          // "1,2,4,8"; empty: batch.world, else 1
  int ranks_per_node = 0;      // 0: GPUs: min(world, 8); CPU: world (all on this node)
  std::string gpu_mem;         // "24GiB,80GiB"; empty: the cuda backend's 24GiB,40GiB,80GiB, CPU: host RAM
  int64_t global_batch = 0;    // 0: batch.global
  int64_t micro = 0;           // 0: the largest micro-batch that fits; else plan this one
  int64_t dataset_pairs = 0;   // 0: the training split read (train_split.h), its mix's epoch at its lengths
  std::string profile;         // compute profile (pmtrain calibrate); empty: assumed
  std::string intra_link = "";  // GPUs within a node: default pcie4 (nvlink-h100 for 80 GiB parts)
  std::string inter_link = "ib200";
  std::string sbatch;          // write an sbatch script for the recommended plan
  std::string launcher = "srun";  // srun | mpirun in that script
  bool json = false;
};

// One size such as 24GiB, 24GB, 80G, 512MiB (binary units: GPUs are sold by them, "24 GB" is 24 GiB).
// ConfigError naming `what` and the text otherwise.
size_t parse_size(const std::string& text, const std::string& what);
// "1,2,4" -> {1, 2, 4}: whole numbers >= 1; ConfigError naming `what` otherwise.
std::vector<int> parse_int_list(const std::string& text, const std::string& what);

int run_plan(const PlanArgs& a);

}  // namespace zero::pmtrain
