// The engine's configuration from a pmtrain config, assembled in one place for the trainer (which
// runs it) and the planner (which sizes its buffers with zero::plan_buffers from the same values).
#pragma once
#include <cstdint>

#include "pmtrain/config.h"
#include "zero/engine_config.h"

namespace zero::pmtrain {

// accum_steps from the batch contract; total_steps for the LR schedule (warmup_ratio is taken of it).
EngineConfig engine_config(const Config& cfg, int64_t accum_steps, int64_t total_steps);

}  // namespace zero::pmtrain
