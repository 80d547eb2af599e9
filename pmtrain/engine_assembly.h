// The engine's configuration and the batch from a pmtrain config, assembled in one place for the trainer
// (which runs them) and `pmtrain plan` / the planner (which size buffers and activations from the same
// values).
#pragma once
#include <cstdint>

#include "pmtrain/config.h"
#include "zero/engine_config.h"

namespace zero::pmtrain {

// At `world` ranks with accum_steps micro-steps a step (the batch contract's); total_steps for the LR
// schedule (warmup_ratio is taken of it).
EngineConfig engine_config(const Config& cfg, int world, int64_t accum_steps, int64_t total_steps);

// zero.accum_dtype as the engine gets it. auto: fp32, except where the accumulator sums nothing (one rank,
// one micro-step per step, and no token budget, which varies the micro-steps): there it only holds the
// gradient the model produced in the parameters' dtype, and that dtype holds it bit for bit (a 4B model
// on one GPU: 7.5 GiB less).
DType accum_dtype_for(const Config& cfg, int world, int64_t accum_steps);

// The batch at `world` ranks: the batch contract (zero::resolve_batch). A pinned batch.world other than
// `world` keeps the global batch and derives accum (ConfigError when global, micro and accum are all
// fixed). With batch.micro_tokens, `micro` is the pairs a budget of max_len-token answers holds (what eval
// and the memory plan use) and accum 1 (the sampler varies it per step).
ResolvedBatch run_batch(const Config& cfg, int world);

}  // namespace zero::pmtrain
