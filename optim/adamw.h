// AdamW on a contiguous fp32 shard (master weights, m, v), torch's formulation: decoupled weight
// decay, bias correction. The same math as torch.optim.AdamW's single-tensor path, element by element.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/math/adamw_math.h"

namespace zero::optim {

// No learning rate here: each step's rate is an argument (the engine's comes from its LrSchedule, whose
// peak_lr is the one place a run's rate is set).
struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// This step's scalars for the per-element update (core/math/adamw_math.h): computed here once for both
// backends (the CUDA backend hands them to its kernel). Arguments as for adamw_step.
math::AdamWScalars adamw_scalars(const AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale);

// One step on n elements. `t` is the 1-based optimizer step; `lr` is this step's rate (after the
// schedule); `decay` selects weight decay for this tensor; `grad_scale` multiplies the gradient
// first (loss mean and clipping folded into one factor).
void adamw_step(float* param, const float* grad, float* m, float* v, size_t n, const AdamWConfig& c, float lr,
                int64_t t, bool decay, float grad_scale);

}  // namespace zero::optim
