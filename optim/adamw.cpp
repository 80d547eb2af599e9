#include "optim/adamw.h"

#include <cmath>

namespace zero::optim {

void adamw_step(float* param, const float* grad, float* m, float* v, size_t n, const AdamWConfig& c, float lr,
                int64_t t, bool decay, float grad_scale) {
  // torch: bias_correction2_sqrt = sqrt(1 - beta2^t); step_size = lr / (1 - beta1^t);
  // denom = sqrt(v) / bias_correction2_sqrt + eps; p -= step_size * m / denom. Computed as torch does
  // (scalars in double, then rounded once) so that results agree to the last bits where possible.
  const double bc1 = 1.0 - std::pow(double(c.beta1), double(t));
  const double bc2 = 1.0 - std::pow(double(c.beta2), double(t));
  const float step_size = float(double(lr) / bc1);
  const float bc2_sqrt = float(std::sqrt(bc2));
  const float decay_factor = decay ? 1.0f - lr * c.weight_decay : 1.0f;
  const float one_minus_b1 = 1.0f - c.beta1;
  const float one_minus_b2 = 1.0f - c.beta2;
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    float p = param[i] * decay_factor;
    // Three fused multiply-adds, written out so the rounding does not depend on compiler flags
    // (-ffp-contract, -march) and the CUDA kernel (cuda/kernels.cu) can match it bit for bit.
    const float mi = std::fma(one_minus_b1, g - m[i], m[i]);        // m.lerp(g, 1 - beta1)
    const float vi = std::fma(c.beta2, v[i], one_minus_b2 * g * g);  // beta2 v + (1 - beta2) g^2
    const float denom = std::sqrt(vi) / bc2_sqrt + c.eps;
    p = std::fma(-step_size, mi / denom, p);                         // p -= step_size * m / denom
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
  }
}

}  // namespace zero::optim
