// What a config's plan uses of `world` 80 GiB GPUs (node_use of plan_gpu_memory, as plan_and_check_run measures
// it for the auto choices), for the tests of those choices on real model shapes. Built once from the config's
// model (its groups and vocabulary); called with the configs a resolver tries.
#pragma once
#include <cstdint>
#include <vector>

#include "model/reward_model.h"
#include "pmtrain/config.h"
#include "pmtrain/engine_params.h"
#include "pmtrain/model_setup.h"
#include "pmtrain/planner.h"

namespace zero::pmtrain {

struct GpuPlanUse {
  GpuPlanUse(const Config& cfg, int world, int64_t accum_steps, int64_t vocab = 151936)
      : qc(resolve_model_config(cfg.model, vocab)), world(world), accum_steps(accum_steps) {
    const model::Qwen3RewardModel m(qc, reward_model_options(cfg));
    groups = engine_groups(m.groups());
    DeviceMemory gpu;
    gpu.device = 0, gpu.free_bytes = gpu.total_bytes = size_t(80) << 30, gpu.name = "H100";
    gpus.assign(size_t(world), gpu);
  }
  // micro 1: a token budget's plan reads the config; batches of pairs of one pair each.
  double operator()(const Config& c) const {
    return node_use(plan_gpu_memory(c, qc, groups, world, 1, accum_steps, gpus));
  }
  model::Qwen3Config qc;
  std::vector<GroupInfo> groups;
  std::vector<DeviceMemory> gpus;
  int world;
  int64_t accum_steps;
};

}  // namespace zero::pmtrain
