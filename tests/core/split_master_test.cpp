// core/math/split_master.h: an fp32 master as (bf16 high half rounded half away from zero, low 16 bits).
// Against literal bit patterns and, over every high half with a set of low halves, against the definition:
// join(split(x)) is x bit for bit, and high is x rounded to nearest bf16 with ties away from zero (equal to
// Eigen's round-to-nearest-even bf16 everywhere but on ties).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/math/split_master.h"

using namespace zero::math;

TEST(SplitMaster, LiteralValues) {
  // 1 + 2^-8 lies halfway between the bf16s 1 (0x3f80) and 1 + 2^-7 (0x3f81): away from zero goes up.
  EXPECT_EQ(split_high(std::bit_cast<float>(0x3f808000u)), 0x3f81);
  EXPECT_EQ(split_low(std::bit_cast<float>(0x3f808000u)), 0x8000);
  EXPECT_EQ(split_high(std::bit_cast<float>(0xbf808000u)), 0xbf81);  // -(1 + 2^-8): away from zero, down
  EXPECT_EQ(split_high(std::bit_cast<float>(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(split_high(std::bit_cast<float>(0x3f80ffffu)), 0x3f81);
  EXPECT_EQ(split_high(1.0f), 0x3f80);
  EXPECT_EQ(split_low(1.0f), 0);
  // A carry into the exponent: just below 2 rounds to 2 (0x4000); the largest float to inf, joined back.
  EXPECT_EQ(split_high(std::bit_cast<float>(0x3fffc000u)), 0x4000);
  EXPECT_EQ(split_join(0x4000, 0xc000), std::bit_cast<float>(0x3fffc000u));
  EXPECT_EQ(split_high(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(split_join(0x7f80, 0xffff), std::numeric_limits<float>::max());
  EXPECT_EQ(split_high(-0.0f), 0x8000);
  EXPECT_EQ(split_join(0x8000, 0), -0.0f);
  EXPECT_TRUE(std::signbit(split_join(0x8000, 0)));
  EXPECT_EQ(split_high(std::nanf("")) & 0x7fc0, 0x7fc0);  // a NaN stays a NaN
}

TEST(SplitMaster, EveryHighHalfRoundTripsAndRoundsToNearest) {
  const uint32_t lows[] = {0x0000, 0x0001, 0x1234, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xabcd, 0xfffe, 0xffff};
  size_t checked = 0, ties_differ = 0;
  for (uint32_t hi = 0; hi <= 0xffffu; ++hi)
    for (uint32_t lo : lows) {
      const uint32_t u = (hi << 16) | lo;
      const float x = std::bit_cast<float>(u);
      if (!std::isfinite(x)) continue;
      ASSERT_EQ(std::bit_cast<uint32_t>(split_join(split_high(x), split_low(x))), u) << std::hex << u;
      const uint16_t even = std::bit_cast<uint16_t>(zero::bf16(x));  // Eigen's conversion
      const uint16_t h = split_high(x);
      if (lo == 0x8000) {  // a tie: the larger magnitude of the two neighbours
        ASSERT_EQ(h, uint16_t(hi + 1)) << std::hex << u;
        ties_differ += h != even;
      } else {
        ASSERT_EQ(h, even) << std::hex << u;
      }
      // The nearest: |x - high| at most half a bf16 ulp of the truncation.
      const double err = std::fabs(double(x) - double(std::bit_cast<float>(uint32_t(h) << 16)));
      const double ulp = std::fabs(double(std::bit_cast<float>((hi + 1) << 16)) - double(std::bit_cast<float>(hi << 16)));
      if (std::isfinite(ulp)) {
        ASSERT_LE(err, ulp / 2) << std::hex << u;
      }
      ++checked;
    }
  EXPECT_GT(checked, 600000u);
  EXPECT_GT(ties_differ, 30000u);  // ties to even keep the even ones (half the ties) where we go up
}
