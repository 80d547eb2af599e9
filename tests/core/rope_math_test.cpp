// core/math/rope_math.h: rotations by hand, the exact rounding (each product rounded, then the sum: the
// same as the operations done in double and rounded, which is exact for one fp32 operation), and the
// transpose undoing the rotation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "core/math/rope_math.h"
#include "core/splitmix.h"

namespace zero {
namespace {

using math::RopePair;

// fp32 a * b and a +- b, each correctly rounded, computed in double (53 >= 2 * 24 + 2 bits: rounding the
// double result to fp32 is the correctly rounded fp32 result) so no contraction can touch them.
float mul(float a, float b) { return float(double(a) * double(b)); }
float add(float a, float b) { return float(double(a) + double(b)); }
float sub(float a, float b) { return float(double(a) - double(b)); }

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

float random_unit(uint64_t& state) { return float(int64_t(splitmix64(state) >> 11) - (int64_t(1) << 52)) * 0x1p-52f; }

TEST(RopeMath, QuarterAndHalfTurnsByHand) {
  // A quarter turn: (1, 0) -> (0, 1), (0, 1) -> (-1, 0); its transpose turns back.
  RopePair r = math::rope_rotate({1.0f, 0.0f}, 0.0f, 1.0f);
  EXPECT_EQ(r.a, 0.0f);
  EXPECT_EQ(r.b, 1.0f);
  r = math::rope_rotate({0.0f, 1.0f}, 0.0f, 1.0f);
  EXPECT_EQ(r.a, -1.0f);
  EXPECT_EQ(r.b, 0.0f);
  r = math::rope_rotate_transpose({0.0f, 1.0f}, 0.0f, 1.0f);
  EXPECT_EQ(r.a, 1.0f);
  EXPECT_EQ(r.b, 0.0f);
  // Angle 0 is the identity; a half turn negates.
  r = math::rope_rotate({3.0f, -5.0f}, 1.0f, 0.0f);
  EXPECT_EQ(r.a, 3.0f);
  EXPECT_EQ(r.b, -5.0f);
  r = math::rope_rotate({3.0f, -5.0f}, -1.0f, 0.0f);
  EXPECT_EQ(r.a, -3.0f);
  EXPECT_EQ(r.b, 5.0f);
  // (2, 4) by cos = 0.5, sin = 0.75 (exact in fp32): (2*0.5 - 4*0.75, 4*0.5 + 2*0.75) = (-2, 3.5).
  r = math::rope_rotate({2.0f, 4.0f}, 0.5f, 0.75f);
  EXPECT_EQ(r.a, -2.0f);
  EXPECT_EQ(r.b, 3.5f);
  r = math::rope_rotate_transpose({2.0f, 4.0f}, 0.5f, 0.75f);  // (1 + 3, 2 - 1.5)
  EXPECT_EQ(r.a, 4.0f);
  EXPECT_EQ(r.b, 0.5f);
}

TEST(RopeMath, EachProductRoundedThenTheSum) {
  uint64_t state = 3;
  for (int i = 0; i < 1'000'000; ++i) {
    const float a = random_unit(state) * 8.0f, b = random_unit(state) * 8.0f;
    const double angle = random_unit(state) * 1e4;
    const float c = float(std::cos(angle)), s = float(std::sin(angle));
    const RopePair r = math::rope_rotate({a, b}, c, s);
    ASSERT_EQ(bits(r.a), bits(sub(mul(a, c), mul(b, s)))) << i;
    ASSERT_EQ(bits(r.b), bits(add(mul(b, c), mul(a, s)))) << i;
    const RopePair t = math::rope_rotate_transpose({a, b}, c, s);
    ASSERT_EQ(bits(t.a), bits(add(mul(a, c), mul(b, s)))) << i;
    ASSERT_EQ(bits(t.b), bits(sub(mul(b, c), mul(a, s)))) << i;
    // The transpose undoes the rotation up to rounding (cos^2 + sin^2 = 1 within fp32).
    const RopePair back = math::rope_rotate_transpose(r, c, s);
    ASSERT_NEAR(back.a, a, 4e-6f * 8.0f) << i;
    ASSERT_NEAR(back.b, b, 4e-6f * 8.0f) << i;
  }
}

}  // namespace
}  // namespace zero
