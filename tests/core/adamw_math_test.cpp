// AdamW after the move into core/math (optim::adamw_scalars + math::adamw_update) against a literal copy
// of optim::adamw_step as it was before (commit f636cb4), bit for bit: the scalars over random
// hyper-parameters, and the step on random states (zeros, denormals, values across the whole range, large
// ones that overflow g^2) for edge cases of lr, weight decay, t and grad_scale, directly and through the
// CPU DeviceOps with fp32 and bf16 gradients. This file is compiled with -ffp-contract=off, as adamw.cpp
// was and is, so the reference rounds as the old code did.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/splitmix.h"
#include "optim/adamw.h"
#include "zero/device_ops.h"

namespace zero {
namespace {

// optim::adamw_step before core/math/adamw_math.h, verbatim.
void reference_adamw_step(float* param, const float* grad, float* m, float* v, size_t n,
                          const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) {
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
    const float mi = std::fma(one_minus_b1, g - m[i], m[i]);        // m.lerp(g, 1 - beta1)
    const float vi = std::fma(c.beta2, v[i], one_minus_b2 * g * g);  // beta2 v + (1 - beta2) g^2
    const float denom = std::sqrt(vi) / bc2_sqrt + c.eps;
    p = std::fma(-step_size, mi / denom, p);                         // p -= step_size * m / denom
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
  }
}

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

// A finite float drawn from: +-0, denormals, log-uniform magnitudes over the whole normal range, values
// near 1, and large values (|x| > 1e19, so g^2 overflows). `nonnegative` for the second moment v.
float random_float(uint64_t& state, bool nonnegative) {
  const uint64_t r = splitmix64(state);
  const uint32_t sign = nonnegative ? 0u : uint32_t(r >> 63) << 31;
  const uint32_t mantissa = uint32_t(r >> 8) & 0x7fffffu;
  uint32_t exponent;
  switch (r % 8) {
    case 0: return std::bit_cast<float>(sign);                                   // +-0
    case 1: return std::bit_cast<float>(sign | (mantissa ? mantissa : 1u));      // denormal
    case 2: exponent = 127 + 64 + uint32_t((r >> 40) % 63); break;              // large: 2^64 .. 2^126
    case 3: case 4: exponent = 127 - 4 + uint32_t((r >> 40) % 8); break;       // near 1
    default: exponent = 1 + uint32_t((r >> 40) % 254); break;                   // any normal
  }
  return std::bit_cast<float>(sign | exponent << 23 | mantissa);
}

struct State {
  std::vector<float> param, grad, m, v;
};

State random_state(size_t n, uint64_t seed) {
  State s{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  for (size_t i = 0; i < n; ++i) {
    s.param[i] = random_float(seed, false);
    s.grad[i] = random_float(seed, false);
    s.m[i] = random_float(seed, false);
    s.v[i] = random_float(seed, true);
  }
  return s;
}

// Fields of `got` and `want` agree bit for bit; reports the first element that does not.
::testing::AssertionResult same_bits(const State& got, const State& want) {
  const std::vector<float> State::* fields[] = {&State::param, &State::m, &State::v};
  const char* names[] = {"param", "m", "v"};
  for (int f = 0; f < 3; ++f)
    for (size_t i = 0; i < (got.*fields[f]).size(); ++i)
      if (bits((got.*fields[f])[i]) != bits((want.*fields[f])[i]))
        return ::testing::AssertionFailure() << names[f] << "[" << i << "]: got " << (got.*fields[f])[i] << " want "
                                             << (want.*fields[f])[i] << " (param " << want.param[i] << ")";
  return ::testing::AssertionSuccess();
}

struct Step {
  float lr;
  float weight_decay;
  bool decay;
  int64_t t;
  float grad_scale;
};

std::vector<Step> edge_cases() {
  std::vector<Step> steps;
  for (float lr : {0.0f, 1e-30f, 3e-4f, 1.0f})
    for (float wd : {0.0f, 0.1f, 1.0f})
      for (bool decay : {false, true})
        for (int64_t t : {int64_t(1), int64_t(2), int64_t(1'000'000), int64_t(1) << 40})  // 2^40: beta^t underflows
          for (float gs : {1.0f, 1e-3f}) steps.push_back({lr, wd, decay, t, gs});
  return steps;
}

optim::AdamWConfig config(const Step& s) {
  optim::AdamWConfig c;
  c.beta1 = 0.9f;
  c.beta2 = 0.95f;
  c.eps = 1e-8f;
  c.weight_decay = s.weight_decay;
  return c;
}

TEST(AdamWMath, ScalarsMatchTheOldExpressions) {
  // The old code computed the scalars inline: compare the struct with its expressions over random
  // hyper-parameters (many lr * wd products, so a fused 1 - lr * wd would show).
  uint64_t seed = 11;
  for (int i = 0; i < 200'000; ++i) {
    optim::AdamWConfig c;
    c.beta1 = 1.0f - std::ldexp(float(splitmix64(seed) % 1000 + 1), -12);
    c.beta2 = 1.0f - std::ldexp(float(splitmix64(seed) % 1000 + 1), -14);
    c.eps = std::ldexp(1.0f + float(splitmix64(seed) % 100) / 100.0f, -int(splitmix64(seed) % 30));
    c.weight_decay = float(splitmix64(seed) % 1'000'000) * 1e-6f;
    const float lr = float(splitmix64(seed) % 1'000'000 + 1) * 1e-8f;
    const int64_t t = int64_t(splitmix64(seed) % 100'000) + 1;
    const bool decay = splitmix64(seed) & 1;
    const float gs = float(splitmix64(seed) % 1000 + 1) * 1e-3f;
    const math::AdamWScalars k = optim::adamw_scalars(c, lr, t, decay, gs);
    const double bc1 = 1.0 - std::pow(double(c.beta1), double(t));
    const double bc2 = 1.0 - std::pow(double(c.beta2), double(t));
    ASSERT_EQ(bits(k.step_size), bits(float(double(lr) / bc1))) << i;
    ASSERT_EQ(bits(k.bc2_sqrt), bits(float(std::sqrt(bc2)))) << i;
    ASSERT_EQ(bits(k.decay_factor), bits(decay ? 1.0f - lr * c.weight_decay : 1.0f)) << "lr " << lr << " wd "
                                                                                           << c.weight_decay;
    ASSERT_EQ(bits(k.one_minus_b1), bits(1.0f - c.beta1));
    ASSERT_EQ(bits(k.one_minus_b2), bits(1.0f - c.beta2));
    ASSERT_EQ(bits(k.beta2), bits(c.beta2));
    ASSERT_EQ(bits(k.eps), bits(c.eps));
    ASSERT_EQ(bits(k.grad_scale), bits(gs));
  }
}

TEST(AdamWMath, StepMatchesTheOldLoopOnEdgeCases) {
  constexpr size_t kPerCase = 8192;  // x 192 cases: 1.6 million element steps
  uint64_t seed = 1;
  for (const Step& s : edge_cases()) {
    const optim::AdamWConfig c = config(s);
    State want = random_state(kPerCase, seed++), got = want;
    reference_adamw_step(want.param.data(), want.grad.data(), want.m.data(), want.v.data(), kPerCase, c, s.lr, s.t,
                         s.decay, s.grad_scale);
    optim::adamw_step(got.param.data(), got.grad.data(), got.m.data(), got.v.data(), kPerCase, c, s.lr, s.t,
                      s.decay, s.grad_scale);
    ASSERT_TRUE(same_bits(got, want)) << "lr " << s.lr << " wd " << s.weight_decay << " decay " << s.decay << " t "
                                      << s.t << " grad_scale " << s.grad_scale;
  }
}

TEST(AdamWMath, MillionElementsOverThreeStepsMatchTheOldLoop) {
  constexpr size_t n = 1'000'000;
  const Step s{1e-3f, 0.1f, true, 1, 0.37f};
  const optim::AdamWConfig c = config(s);
  State want = random_state(n, 99), got = want;
  for (int64_t t = 1; t <= 3; ++t) {
    reference_adamw_step(want.param.data(), want.grad.data(), want.m.data(), want.v.data(), n, c, s.lr, t, s.decay,
                         s.grad_scale);
    optim::adamw_step(got.param.data(), got.grad.data(), got.m.data(), got.v.data(), n, c, s.lr, t, s.decay,
                      s.grad_scale);
    ASSERT_TRUE(same_bits(got, want)) << "step " << t;
  }
}

// The CPU backend's adamw: fp32 gradients as they are, bf16 gradients widened exactly (Eigen's
// conversion here) in chunks; n is not a multiple of the chunk.
TEST(AdamWMath, CpuOpsMatchTheOldLoopWithFp32AndBf16Gradients) {
  constexpr size_t n = 3 * 4096 + 123;
  auto ops = make_cpu_ops();
  uint64_t seed = 500;
  for (const Step& s : edge_cases()) {
    if (s.grad_scale != 1e-3f || s.t > 2) continue;  // a few of the edge cases are enough here
    const optim::AdamWConfig c = config(s);
    State want = random_state(n, seed++), got = want;
    std::vector<bf16> grad16(n);
    for (size_t i = 0; i < n; ++i) grad16[i] = bf16(want.grad[i]);
    ops->adamw(got.param.data(), got.grad.data(), DType::F32, got.m.data(), got.v.data(), n, c, s.lr, s.t, s.decay,
               s.grad_scale);
    reference_adamw_step(want.param.data(), want.grad.data(), want.m.data(), want.v.data(), n, c, s.lr, s.t,
                         s.decay, s.grad_scale);
    ASSERT_TRUE(same_bits(got, want)) << "fp32 gradients, lr " << s.lr << " wd " << s.weight_decay;

    std::vector<float> widened(n);
    for (size_t i = 0; i < n; ++i) widened[i] = float(grad16[i]);
    ops->adamw(got.param.data(), grad16.data(), DType::BF16, got.m.data(), got.v.data(), n, c, s.lr, s.t + 1,
               s.decay, s.grad_scale);
    reference_adamw_step(want.param.data(), widened.data(), want.m.data(), want.v.data(), n, c, s.lr, s.t + 1,
                         s.decay, s.grad_scale);
    ASSERT_TRUE(same_bits(got, want)) << "bf16 gradients, lr " << s.lr << " wd " << s.weight_decay;
  }
}

}  // namespace
}  // namespace zero
