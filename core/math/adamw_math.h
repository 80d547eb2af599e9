// AdamW's arithmetic, torch.optim.AdamW's single-tensor formulation (decoupled weight decay, bias
// correction), split in two: the per-step scalars, computed once per step on the host
// (optim::adamw_scalars in optim/adamw.cpp, in double and rounded once as torch does, in one
// translation unit compiled with -ffp-contract=off so 1 - lr * wd rounds twice whatever the caller's
// flags), and the per-element update below, which the CPU loop (optim::adamw_step) and the CUDA kernel
// (cuda/kernels.cu) both call. Every operation is rounded once, in one order, with exactly three fused
// multiply-adds (rounding.h), so the two backends produce the same bits.
#pragma once
#include "core/math/hd.h"
#include "core/math/rounding.h"

namespace zero::math {

struct AdamWScalars {
  float step_size;     // lr / (1 - beta1^t)
  float bc2_sqrt;      // sqrt(1 - beta2^t)
  float decay_factor;  // 1 - lr * weight_decay; 1 for a tensor without weight decay
  float one_minus_b1;  // 1 - beta1
  float one_minus_b2;  // 1 - beta2
  float beta2;
  float eps;
  float grad_scale;    // multiplies the gradient first (the loss mean and clipping in one factor)
};

// One element's optimizer state: the fp32 master weight and the two moments.
struct AdamWState {
  float param, m, v;
};

// One step of one element; `grad` is the raw gradient (fp32, or bf16 widened exactly).
ZERO_HD AdamWState adamw_update(AdamWState s, float grad, const AdamWScalars& k) {
  const float g = mul_rn(grad, k.grad_scale);
  const float p = mul_rn(s.param, k.decay_factor);
  const float m = fma_rn(k.one_minus_b1, sub_rn(g, s.m), s.m);                 // m.lerp(g, 1 - beta1)
  const float v = fma_rn(k.beta2, s.v, mul_rn(mul_rn(k.one_minus_b2, g), g));  // beta2 v + (1 - beta2) g^2
  const float denom = add_rn(div_rn(sqrt_rn(v), k.bc2_sqrt), k.eps);           // sqrt(v) / sqrt(1 - beta2^t) + eps
  return {fma_rn(-k.step_size, div_rn(m, denom), p), m, v};                    // p - step_size * m / denom
}

}  // namespace zero::math
