// The CPU backend's reductions against plain loops written here: the sum of squares (the gradient norm's) over
// every length from 0 to 40 (the eight running sums and the tail past the last eight), in fp32 and bf16, to the
// last bits a different order of the same double adds can change; non-finite values pass through.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "zero/device_ops.h"

namespace zero {
namespace {

TEST(CpuOps, SumOfSquaresOfEveryLength) {
  auto ops = make_cpu_ops();
  uint64_t state = 7;
  for (size_t n = 0; n <= 40; ++n) {
    std::vector<float> f(n);
    std::vector<uint16_t> b(n);
    long double want = 0, want_bf16 = 0;
    for (size_t i = 0; i < n; ++i) {
      f[i] = float(double(splitmix64(state) >> 11) * 0x1p-53 * 8 - 4);
      b[i] = math::f32_to_bf16(f[i]);
      want += (long double)f[i] * f[i];
      const float x = math::bf16_to_f32(b[i]);
      want_bf16 += (long double)x * x;
    }
    EXPECT_NEAR(ops->sum_squares(f.data(), DType::F32, n), double(want), 1e-14 * double(want) + 1e-300) << n;
    EXPECT_NEAR(ops->sum_squares(b.data(), DType::BF16, n), double(want_bf16), 1e-14 * double(want_bf16) + 1e-300) << n;
  }
  std::vector<float> bad(19, 1.0f);
  bad[17] = std::numeric_limits<float>::infinity();  // in the tail
  EXPECT_TRUE(std::isinf(ops->sum_squares(bad.data(), DType::F32, bad.size())));
  bad[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(ops->sum_squares(bad.data(), DType::F32, bad.size())));
}

}  // namespace
}  // namespace zero
