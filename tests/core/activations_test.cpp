// core/math/activations.h: values by hand, against independent long-double formulas in the range where
// those are safe, at the asymptotes (where the naive formulas overflow or flush), and silu's derivative
// against a central finite difference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/math/activations.h"

namespace zero {
namespace {

using math::sigmoid;
using math::silu;
using math::silu_grad;
using math::softplus;

// |got - want| <= ulps * epsilon(T) * |want|.
template <class T>
::testing::AssertionResult close_rel(T got, long double want, double ulps) {
  const long double tol = ulps * std::numeric_limits<T>::epsilon() * std::fabs(want);
  if (std::fabs(got - want) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << double(got) << ", want " << double(want) << " (off by "
                                       << double(std::fabs(got - want) / (std::numeric_limits<T>::epsilon() * std::fabs(want)))
                                       << " eps relative, allowed " << ulps << ")";
}

long double sigmoid_ld(long double x) { return 1.0L / (1.0L + std::exp(-x)); }

TEST(Activations, ValuesByHand) {
  EXPECT_EQ(sigmoid(0.0f), 0.5f);
  EXPECT_EQ(sigmoid(0.0), 0.5);
  EXPECT_EQ(silu(0.0f), 0.0f);
  EXPECT_EQ(silu_grad(0.0f), 0.5f);  // s (1 + 0 (1 - s)) with s = 1/2
  EXPECT_EQ(silu_grad(0.0), 0.5);
  EXPECT_NEAR(softplus(0.0), std::log(2.0), 1e-16);
  EXPECT_EQ(softplus(0.0f), std::log1p(1.0f));
}

TEST(Activations, SigmoidAndSiluMatchLongDouble) {
  for (int i = -8000; i <= 8000; ++i) {
    const double x = i / 100.0;  // [-80, 80]
    ASSERT_TRUE(close_rel(sigmoid(x), sigmoid_ld(x), 4)) << "sigmoid(" << x << ")";
    ASSERT_TRUE(close_rel(sigmoid(float(x)), sigmoid_ld(float(x)), 4)) << "sigmoid(" << x << "f)";
    ASSERT_TRUE(close_rel(silu(x), x * sigmoid_ld(x), 4)) << "silu(" << x << ")";
    ASSERT_TRUE(close_rel(silu(float(x)), float(x) * sigmoid_ld(float(x)), 4)) << "silu(" << x << "f)";
  }
}

TEST(Activations, SigmoidAsymptotes) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(sigmoid(1000.0), 1.0);
  EXPECT_EQ(sigmoid(-1000.0), 0.0);
  EXPECT_EQ(sigmoid(inf), 1.0);
  EXPECT_EQ(sigmoid(-inf), 0.0);
  EXPECT_EQ(sigmoid(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_TRUE(std::isnan(sigmoid(std::nan(""))));
  // Far left the value is exp(x), down to the denormals: e / (1 + e) keeps it where 1 / (1 + exp(-x))
  // has exp(-x) overflow to inf and returns 0.
  EXPECT_TRUE(close_rel(sigmoid(-700.0), std::exp(-700.0L), 4));
  EXPECT_GT(sigmoid(-100.0f), 0.0f);
  EXPECT_EQ(sigmoid(-100.0f), std::exp(-100.0f));
}

TEST(Activations, SiluGradMatchesFiniteDifferenceAndLongDouble) {
  for (int i = -2000; i <= 2000; ++i) {
    const double x = i / 100.0;  // [-20, 20]
    const double h = 1e-5;
    const double fd = (silu(x + h) - silu(x - h)) / (2 * h);
    ASSERT_NEAR(silu_grad(x), fd, 1e-9) << "x " << x;
    // An independent form, silu' = s + x s (1 - s). 1 - s cancels for large x: the rounding error of s,
    // times x, bounds the error (torch's silu_backward has the same).
    const long double s = sigmoid_ld(x);
    ASSERT_NEAR(silu_grad(x), double(s + x * s * (1 - s)), 2 * std::numeric_limits<double>::epsilon() * (1 + std::fabs(x)))
        << "x " << x;
    const float xf = float(x);
    const long double sf = sigmoid_ld(xf);
    ASSERT_NEAR(silu_grad(xf), double(sf + xf * sf * (1 - sf)), 2 * std::numeric_limits<float>::epsilon() * (1 + std::fabs(x)))
        << "x " << x << "f";
  }
}

TEST(Activations, SoftplusMatchesLongDoubleInTheSafeRange) {
  for (int i = -3000; i <= 3000; ++i) {
    const double z = i / 100.0;  // [-30, 30]: exp(z) in long double is far from overflow
    const long double want = std::log1p(std::exp((long double)z));
    ASSERT_TRUE(close_rel(softplus(z), want, 4)) << "softplus(" << z << ")";
    const float zf = float(z);
    ASSERT_TRUE(close_rel(softplus(zf), std::log1p(std::exp((long double)zf)), 4)) << "softplus(" << z << "f)";
  }
}

TEST(Activations, SoftplusAsymptotes) {
  // Right: softplus(z) = z + log1p(exp(-z)) is z exactly once exp(-z) is below half an ulp of z; no overflow
  // where log1p(exp(z)) would be inf.
  for (double z : {40.0, 100.0, 1000.0, 1e300}) EXPECT_EQ(softplus(z), z) << z;
  for (float z : {20.0f, 100.0f, 1000.0f, 1e30f}) EXPECT_EQ(softplus(z), z) << z;
  EXPECT_EQ(softplus(std::numeric_limits<double>::infinity()), std::numeric_limits<double>::infinity());
  // Left: softplus(z) = log1p(exp(z)) ~ exp(z), to the last bits, and 0 once exp(z) underflows.
  for (double z : {-40.0, -100.0, -700.0}) EXPECT_TRUE(close_rel(softplus(z), std::exp((long double)z), 4)) << z;
  EXPECT_EQ(softplus(-1000.0), 0.0);
  EXPECT_EQ(softplus(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_TRUE(std::isnan(softplus(std::nan(""))));
}

}  // namespace
}  // namespace zero
