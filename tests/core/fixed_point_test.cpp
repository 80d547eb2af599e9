// core/math/fixed_point.h: gradient terms into int64 units of 2^-32 and back, and the exact sum of squares,
// against literal values and long double arithmetic written here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/math/fixed_point.h"

using namespace zero::math;

TEST(FixedPoint, RoundsToTheGridTiesToEven) {
  EXPECT_EQ(to_fixed(1.0f), int64_t(1) << 32);
  EXPECT_EQ(to_fixed(-0.5f), -(int64_t(1) << 31));
  EXPECT_EQ(to_fixed(0x1p-32f), 1);
  EXPECT_EQ(to_fixed(0x1p-33f), 0);        // half a unit: ties to the even 0
  EXPECT_EQ(to_fixed(0x1.8p-32f), 2);      // 1.5 units: to the even 2
  EXPECT_EQ(to_fixed(0x1.8p-33f), 1);      // 0.75 units
  EXPECT_EQ(to_fixed(-0x1.8p-32f), -2);
  EXPECT_EQ(to_fixed(16383.5f), int64_t(16383) * (int64_t(1) << 32) + (int64_t(1) << 31));
  // Out of range and NaN never convert undefined: clamped to the limit, 2^46 units, so 2^16 clamped terms
  // still sum inside int64; NaN to 0 (the engine skips such steps).
  EXPECT_EQ(to_fixed(std::numeric_limits<float>::infinity()), int64_t(1) << 46);
  EXPECT_EQ(to_fixed(-1e30f), -(int64_t(1) << 46));
  EXPECT_EQ(to_fixed(16384.0f), int64_t(1) << 46);
  EXPECT_EQ(to_fixed(std::numeric_limits<float>::quiet_NaN()), 0);
}

TEST(FixedPoint, ReadsBackWithOneRounding) {
  EXPECT_EQ(from_fixed(int64_t(1) << 32), 1.0f);
  EXPECT_EQ(from_fixed(-3), -0x1.8p-31f);
  // 2^32 + 1 units is 1 + 2^-32: beyond fp32's 24 bits, rounds once to 1.
  EXPECT_EQ(from_fixed((int64_t(1) << 32) + 1), 1.0f);
  // (2^24 + 1) units: a tie between 2^24 and 2^24 + 2, to the even 2^24.
  EXPECT_EQ(from_fixed((int64_t(1) << 24) + 1), 0x1p-8f);
  // |x| >= 2^-9: its fp32 ulp is at least the grid's unit, so it is on the grid.
  for (float x : {0.1f, -2.75e-3f, 1234.567f, 16383.99f}) EXPECT_EQ(from_fixed(to_fixed(x)), x) << x;
}

TEST(FixedPoint, TheLimitKeepsAStepsSumInsideInt64) {
  EXPECT_EQ(kFixedTermLimit, 16384.0f);
  // 2^16 terms at the clamp (the largest any term converts to) still sum inside int64.
  const long double most = (long double)to_fixed(std::numeric_limits<float>::max()) * kFixedMaxTerms;
  EXPECT_LE(most, 0x1p62L);
}

TEST(FixedPoint, SquareSumIsExact) {
  // Values whose squares need all 126 bits, and small ones beside them.
  const std::vector<int64_t> q = {(int64_t(1) << 62) - 1, -((int64_t(1) << 62) - 3), 3, -1, int64_t(1) << 40};
  FixedSquareSum s;
  for (int64_t x : q) s.add_square(x);
  // The same sum as a 192-bit integer, in 32-bit pieces computed here with 64-bit products.
  // (2^62 - 1)^2 + (2^62 - 3)^2 + 9 + 1 + 2^80 = 2^125 - 2^63 - 3 * 2^63 + 1 + 9 + 9 + 1 + 2^80
  //                                            = 2^125 + 2^80 - 2^65 + 20
  const unsigned __int128 want = ((unsigned __int128)1 << 125) + ((unsigned __int128)1 << 80) -
                                 ((unsigned __int128)1 << 65) + 20;
  EXPECT_EQ(s.w[0], uint64_t(want));
  EXPECT_EQ(s.w[1], uint64_t(want >> 64));
  EXPECT_EQ(s.w[2], 0u);
  // Past 128 bits: 64 squares of 2^62 are 2^130.
  FixedSquareSum big;
  for (int i = 0; i < 64; ++i) big.add_square(int64_t(1) << 62);
  EXPECT_EQ(big.w[0], 0u);
  EXPECT_EQ(big.w[1], 0u);
  EXPECT_EQ(big.w[2], 4u);
  EXPECT_EQ(big.value(), 0x1p66);  // 2^130 units of 2^-64
}

TEST(FixedPoint, LimbsSumExactlyInAnyOrder) {
  // Three "ranks" with large partials: their limbs summed as doubles in two orders give the same value,
  // that of the integer sum.
  FixedSquareSum a, b, c;
  a.add_square((int64_t(1) << 62) - 1);
  b.add_square(-(int64_t(1) << 61) - 12345);
  c.add_square(987654321);
  for (int i = 0; i < 70; ++i) c.add_square(int64_t(1) << 62);
  double la[12], lb[12], lc[12], fwd[12], rev[12];
  a.to_limbs(la);
  b.to_limbs(lb);
  c.to_limbs(lc);
  for (int i = 0; i < 12; ++i) {
    fwd[i] = (la[i] + lb[i]) + lc[i];
    rev[i] = la[i] + (lc[i] + lb[i]);
    EXPECT_LT(la[i], 65536.0);
  }
  FixedSquareSum all = a;
  all.add(b);
  all.add(c);
  EXPECT_EQ(FixedSquareSum::limbs_to_value(fwd), all.value());
  EXPECT_EQ(FixedSquareSum::limbs_to_value(rev), all.value());
  // And the value is the real sum of squares (relative to long double).
  const long double want = ((long double)((int64_t(1) << 62) - 1) * ((int64_t(1) << 62) - 1) +
                            (long double)((int64_t(1) << 61) + 12345) * ((int64_t(1) << 61) + 12345) +
                            987654321.0L * 987654321.0L + 70.0L * 0x1p124L) * 0x1p-64L;
  EXPECT_NEAR(double(all.value() / want), 1.0, 1e-15);
}
