#include "optim/adamw.h"

#include <cmath>

namespace zero::optim {

math::AdamWScalars adamw_scalars(const AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) {
  // torch: bias_correction2_sqrt = sqrt(1 - beta2^t); step_size = lr / (1 - beta1^t). Computed as torch
  // does (in double, then rounded once) so that results agree to the last bits where possible. Both
  // backends take the scalars from here: 1 - lr * wd is a product and a difference, each rounded, only
  // because this file is compiled with -ffp-contract=off (the CUDA backend's host code is not).
  const double bc1 = 1.0 - std::pow(double(c.beta1), double(t));
  const double bc2 = 1.0 - std::pow(double(c.beta2), double(t));
  return {.step_size = float(double(lr) / bc1),
          .bc2_sqrt = float(std::sqrt(bc2)),
          .decay_factor = decay ? 1.0f - lr * c.weight_decay : 1.0f,
          .one_minus_b1 = 1.0f - c.beta1,
          .one_minus_b2 = 1.0f - c.beta2,
          .beta2 = c.beta2,
          .eps = c.eps,
          .grad_scale = grad_scale};
}

void adamw_step(float* param, const float* grad, float* m, float* v, size_t n, const AdamWConfig& c, float lr,
                int64_t t, bool decay, float grad_scale) {
  const math::AdamWScalars k = adamw_scalars(c, lr, t, decay, grad_scale);
  for (size_t i = 0; i < n; ++i) {
    const math::AdamWState s = math::adamw_update({param[i], m[i], v[i]}, grad[i], k);
    param[i] = s.param;
    m[i] = s.m;
    v[i] = s.v;
  }
}

}  // namespace zero::optim
