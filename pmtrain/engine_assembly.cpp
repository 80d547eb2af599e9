#include "pmtrain/engine_assembly.h"

#include <cmath>

#include "core/dtype.h"

namespace zero::pmtrain {

EngineConfig engine_config(const Config& cfg, int64_t accum_steps, int64_t total_steps) {
  EngineConfig ec;
  ec.stage = int(cfg.zero.stage);
  ec.bucket_elements = size_t(cfg.zero.bucket_elements);
  ec.prefetch_depth = int(cfg.zero.prefetch_depth);
  ec.param_dtype = cfg.zero.param_dtype;
  ec.accum_dtype = cfg.zero.accum_dtype;
  ec.reduce_dtype = cfg.zero.reduce_dtype;
  ec.accum_steps = int(accum_steps);
  ec.clip_norm = float(cfg.optim.clip_norm);
  ec.adamw = {float(cfg.optim.lr), float(cfg.optim.beta1), float(cfg.optim.beta2), float(cfg.optim.eps),
              float(cfg.optim.weight_decay)};
  const int64_t warmup = cfg.optim.warmup_steps > 0 ? cfg.optim.warmup_steps
                                                     : int64_t(std::ceil(cfg.optim.warmup_ratio * total_steps));
  ec.schedule = {cfg.optim.schedule, float(cfg.optim.lr), warmup, total_steps,
                 float(cfg.optim.min_lr_ratio)};
  validate(ec);
  return ec;
}

}  // namespace zero::pmtrain
