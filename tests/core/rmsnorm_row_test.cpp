// core/math/rmsnorm_row.h: a row by hand, the exact rounding of the per-element and per-row formulas
// (operations done in double and rounded: exact for one fp32 operation), and whole rows forward and
// backward against an independent fp64 formula (backward from the Jacobian written out).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/math/rmsnorm_row.h"
#include "core/splitmix.h"

namespace zero {
namespace {

// One fp32 operation, correctly rounded, computed in double (53 >= 2 * 24 + 2 bits) so no contraction can
// touch it.
float mul(float a, float b) { return float(double(a) * double(b)); }
float sub(float a, float b) { return float(double(a) - double(b)); }
float add(float a, float b) { return float(double(a) + double(b)); }
float div(float a, float b) { return float(double(a) / double(b)); }
float sqrt_(float a) { return float(std::sqrt(double(a))); }

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

float random_unit(uint64_t& state) { return float(int64_t(splitmix64(state) >> 11) - (int64_t(1) << 52)) * 0x1p-52f; }

TEST(RmsNormRow, ByHand) {
  const float x[4] = {2.0f, -2.0f, 2.0f, -2.0f}, w[4] = {1.0f, 2.0f, 3.0f, 0.5f};
  float y[4];
  EXPECT_EQ(math::rmsnorm_row_forward(x, w, 4, 0.0f, y), 0.5f);  // mean(x^2) = 4
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 3.0f);
  EXPECT_EQ(y[3], -0.5f);
  EXPECT_EQ(math::rmsnorm_rstd(16.0f, 4, 5.0f), 1.0f / 3.0f);  // 1 / sqrt(4 + 5)
  // Backward with dy = w: xhat = +-1, dxhat = dy * w = w^2, mean(xhat * dxhat) = (1 - 4 + 9 - 0.25) / 4,
  // dx = (dxhat - xhat * mean) * 0.5.
  float dx[4], dw[4] = {10.0f, 10.0f, 10.0f, 10.0f};
  math::rmsnorm_row_backward(x, w, 0.5f, w, 4, dx, dw);
  const float mean = 5.75f / 4.0f;
  const float want_dx[4] = {(1.0f - mean) * 0.5f, (4.0f + mean) * 0.5f, (9.0f - mean) * 0.5f, (0.25f + mean) * 0.5f};
  const float want_dw[4] = {11.0f, 8.0f, 13.0f, 9.5f};  // 10 + dy * xhat
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(dx[i], want_dx[i]) << i;
    EXPECT_EQ(dw[i], want_dw[i]) << i;
  }
}

TEST(RmsNormRow, PerElementAndPerRowRounding) {
  uint64_t state = 5;
  for (int i = 0; i < 1'000'000; ++i) {
    const float x = random_unit(state) * 4.0f, w = random_unit(state) * 2.0f, rstd = 0.5f + std::fabs(random_unit(state));
    ASSERT_EQ(bits(math::rmsnorm_y(x, w, rstd)), bits(mul(w, mul(x, rstd)))) << i;  // w * (x * rstd)
    const float xhat = random_unit(state), dxhat = random_unit(state), mean = random_unit(state);
    ASSERT_EQ(bits(math::rmsnorm_dx(xhat, dxhat, mean, rstd)), bits(mul(sub(dxhat, mul(xhat, mean)), rstd))) << i;
    const float sum_squares = std::fabs(random_unit(state)) * 1000.0f, eps = 1e-6f;
    const int64_t dim = 1 + int64_t(splitmix64(state) % 4096);
    ASSERT_EQ(bits(math::rmsnorm_rstd(sum_squares, dim, eps)),
              bits(div(1.0f, sqrt_(add(div(sum_squares, float(dim)), eps))))) << i;
  }
}

TEST(RmsNormRow, RowsMatchFp64) {
  uint64_t state = 7;
  const float eps = 1e-6f;
  for (int64_t dim : {1, 2, 7, 64, 1000, 2560}) {
    std::vector<float> w(dim), dw(dim, 0.0f);
    std::vector<double> want_dw(dim, 0.0);
    for (auto& v : w) v = 1.0f + 0.5f * random_unit(state);
    for (int row = 0; row < 3; ++row) {
      std::vector<float> x(dim), dy(dim), y(dim), dx(dim);
      for (auto& v : x) v = 3.0f * random_unit(state);
      for (auto& v : dy) v = random_unit(state);
      const float rstd = math::rmsnorm_row_forward(x.data(), w.data(), dim, eps, y.data());
      math::rmsnorm_row_backward(x.data(), w.data(), rstd, dy.data(), dim, dx.data(), dw.data());

      double ss = 0, dot = 0;  // dot = sum dy w x
      for (int64_t i = 0; i < dim; ++i) ss += double(x[i]) * x[i], dot += double(dy[i]) * w[i] * x[i];
      const double r = 1.0 / std::sqrt(ss / double(dim) + eps);
      ASSERT_NEAR(rstd, r, 1e-6 * r) << "dim " << dim;
      double scale = 0;
      for (int64_t i = 0; i < dim; ++i) scale = std::max(scale, std::fabs(double(w[i]) * dy[i] * r));
      for (int64_t i = 0; i < dim; ++i) {
        ASSERT_NEAR(y[i], w[i] * x[i] * r, 1e-6 * std::fabs(w[i] * x[i] * r) + 1e-7) << "dim " << dim << " i " << i;
        // dx_j = sum_i dy_i dy_i/dx_j = dy_j w_j r - x_j r^3 / dim * sum_i dy_i w_i x_i.
        const double want_dx = dy[i] * double(w[i]) * r - x[i] * r * r * r / double(dim) * dot;
        ASSERT_NEAR(dx[i], want_dx, 1e-5 * scale) << "dim " << dim << " i " << i;
        want_dw[i] += dy[i] * double(x[i]) * r;
      }
    }
    for (int64_t i = 0; i < dim; ++i) ASSERT_NEAR(dw[i], want_dw[i], 1e-5) << "dim " << dim << " i " << i;
  }
}

}  // namespace
}  // namespace zero
