// core/math/bf16.h against Eigen::bfloat16's conversion (the outside reference, and what the CPU
// backend's storage type does): about 10^7 random fp32 bit patterns, every high half with the low
// halves that decide rounding, and the special classes by name; bf16 -> fp32 for all 2^16 patterns.
// Also: CpuOps converts through it.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "zero/device_ops.h"

namespace zero {
namespace {

uint16_t eigen_bf16(uint32_t f32_bits) { return std::bit_cast<uint16_t>(bf16(std::bit_cast<float>(f32_bits))); }

// The first pattern where the shared conversion and Eigen's disagree, as a readable failure.
::testing::AssertionResult same_as_eigen(uint32_t u) {
  const uint16_t got = math::f32_to_bf16(std::bit_cast<float>(u)), want = eigen_bf16(u);
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::hex << "fp32 0x" << u << ": got bf16 0x" << got << ", Eigen 0x"
                                       << want;
}

TEST(Bf16, RandomBitPatternsMatchEigen) {
  uint64_t state = 0x5eed;
  for (int i = 0; i < 10'000'000; ++i) {
    const uint32_t u = uint32_t(splitmix64(state));
    if (math::f32_to_bf16(std::bit_cast<float>(u)) != eigen_bf16(u)) {
      ASSERT_TRUE(same_as_eigen(u));
    }
  }
}

// Every sign, exponent and upper mantissa (the 2^16 high halves: zeros, denormals, normals, inf, NaN)
// with the low halves that decide the rounding: exact, just above, just below and at the halfway point.
TEST(Bf16, EveryHighHalfWithRoundingLowHalvesMatchesEigen) {
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const uint32_t u = hi << 16 | lo;
      if (math::f32_to_bf16(std::bit_cast<float>(u)) != eigen_bf16(u)) {
        ASSERT_TRUE(same_as_eigen(u));
      }
    }
}

TEST(Bf16, SpecialClasses) {
  auto to_bf16 = [](uint32_t u) { return math::f32_to_bf16(std::bit_cast<float>(u)); };
  // NaN: quiet with its sign, whatever the payload (one only in the low bits would truncate to inf).
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu, 0x7f80ffffu, 0x7f810000u}) {
    EXPECT_EQ(to_bf16(nan), 0x7fc0) << std::hex << nan;
    EXPECT_EQ(to_bf16(nan | 0x80000000u), 0xffc0) << std::hex << nan;
    EXPECT_TRUE(same_as_eigen(nan));
    EXPECT_TRUE(same_as_eigen(nan | 0x80000000u));
  }
  EXPECT_EQ(to_bf16(0x7f800000u), 0x7f80);  // inf
  EXPECT_EQ(to_bf16(0xff800000u), 0xff80);  // -inf
  EXPECT_EQ(to_bf16(0x00000000u), 0x0000);  // 0
  EXPECT_EQ(to_bf16(0x80000000u), 0x8000);  // -0 keeps its sign
  // Denormals round like any other value; the smallest ones round to (signed) zero.
  EXPECT_EQ(to_bf16(0x00000001u), 0x0000);
  EXPECT_EQ(to_bf16(0x80000001u), 0x8000);
  EXPECT_EQ(to_bf16(0x00018000u), 0x0002);  // halfway, odd lsb: up to even
  EXPECT_EQ(to_bf16(0x00028000u), 0x0002);  // halfway, even lsb: stays
  EXPECT_EQ(to_bf16(0x007fffffu), 0x0080);  // the largest denormal rounds up into the smallest normal
  // Ties to even at exact halfway points: 1 + 2^-8 lies between 1 (0x3f80) and 1 + 2^-7 (0x3f81).
  EXPECT_EQ(to_bf16(std::bit_cast<uint32_t>(1.0f + 0x1p-8f)), 0x3f80);
  EXPECT_EQ(to_bf16(std::bit_cast<uint32_t>(1.0f + 3 * 0x1p-8f)), 0x3f82);
  EXPECT_EQ(to_bf16(std::bit_cast<uint32_t>(-(1.0f + 3 * 0x1p-8f))), 0xbf82);
  EXPECT_EQ(to_bf16(0x3f808001u), 0x3f81);  // just past halfway: up
  EXPECT_EQ(to_bf16(0x3f817fffu), 0x3f81);  // just before halfway: down
  // Past the largest bf16 (0x7f7f): the halfway point and above round up into inf, below it stays.
  EXPECT_EQ(to_bf16(0x7f7f7fffu), 0x7f7f);
  EXPECT_EQ(to_bf16(0x7f7f8000u), 0x7f80);
  EXPECT_EQ(to_bf16(std::bit_cast<uint32_t>(std::numeric_limits<float>::max())), 0x7f80);
  EXPECT_EQ(to_bf16(std::bit_cast<uint32_t>(-std::numeric_limits<float>::max())), 0xff80);
}

TEST(Bf16, ToFp32IsExactForAllPatterns) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = math::bf16_to_f32(uint16_t(b));
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16) << std::hex << b;
    ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(float(std::bit_cast<bf16>(uint16_t(b)))));
    // Back again: every non-NaN bf16 is its own rounding.
    if ((b & 0x7fffu) <= 0x7f80u) {
      ASSERT_EQ(math::f32_to_bf16(f), b) << std::hex << b;
    }
  }
}

// The CPU backend's copy and add convert through the same function.
TEST(Bf16, CpuOpsConvertThroughIt) {
  std::vector<float> f;
  for (uint32_t hi = 0; hi < 0x10000u; hi += 7)
    for (uint32_t lo : {0x0000u, 0x7fffu, 0x8000u, 0x8001u}) f.push_back(std::bit_cast<float>(hi << 16 | lo));
  const size_t n = f.size();
  auto ops = make_cpu_ops();
  std::vector<uint16_t> b(n);
  ops->copy(b.data(), DType::BF16, f.data(), DType::F32, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], math::f32_to_bf16(f[i])) << i;
  std::vector<float> back(n);
  ops->copy(back.data(), DType::F32, b.data(), DType::BF16, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), uint32_t(b[i]) << 16) << i;
  // add into bf16: the fp32 sum rounded once.
  std::vector<uint16_t> acc = b;
  ops->add(acc.data(), DType::BF16, f.data(), DType::F32, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], math::f32_to_bf16(math::bf16_to_f32(b[i]) + f[i])) << i;
}

}  // namespace
}  // namespace zero
