// The CPU backend's reductions against plain loops written here: the sum of squares (the gradient norm's) over
// every length from 0 to 40 (the eight running sums and the tail past the last eight), in fp32 and bf16, to the
// last bits a different order of the same double adds can change; non-finite values pass through. The
// element-wise ops split over threads (copy, add, the non-finite counts, AdamW, AdamW on a split master) give
// the same bits at 1, 3 and 5 threads, the adds those of a plain loop here and the counts the values planted;
// so do the sums of squares past one 64 Ki-element block, fp64 and fixed-point. The non-finite counts by runs
// (one accumulator a tensor) against literal counts, and run ends that go back refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/math/bf16.h"
#include "core/math/fixed_point.h"
#include "core/splitmix.h"
#include "optim/adamw.h"
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

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// 300,001 elements: 3 parts of 100,000 and more at 3 threads, 4 at 5 (parts of at least 64 Ki elements).
TEST(CpuOps, ElementWiseOpsAreTheSameBitsAtAnyThreadCount) {
  constexpr size_t n = 300001;
  uint64_t state = 11;
  auto uniform = [&] { return float(double(splitmix64(state) >> 11) * 0x1p-53 * 2 - 1); };
  std::vector<float> a(n), g(n), m0(n, 0.0f), v0(n, 0.0f);
  std::vector<uint16_t> gb(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = uniform();
    g[i] = uniform() * 1e-2f;
    gb[i] = math::f32_to_bf16(g[i]);
  }
  std::vector<float> bad = a;  // 7 non-finite values, in different parts; 3 more at or past 0.5 + 1 NaN
  for (const size_t i : {size_t(0), size_t(70000), size_t(150001), size_t(222222), size_t(299999)})
    bad[i] = std::numeric_limits<float>::infinity();
  bad[1] = -std::numeric_limits<float>::infinity();
  bad[n - 1] = std::numeric_limits<float>::quiet_NaN();
  const auto planted_limit = [&](float limit) {
    size_t k = 0;
    for (float x : bad) k += !(std::fabs(x) < limit);
    return k;
  };

  struct Result {
    std::vector<uint16_t> to_bf16;
    std::vector<float> sum, p, m, v, pb, p_split;
    std::vector<uint16_t> high, low;
    size_t nonfinite = 0;
    double over_half = 0;
  };
  optim::AdamWConfig c;
  c.weight_decay = 0.1f;
  auto run = [&](int threads) {
    auto ops = make_cpu_ops(threads);
    Result r;
    r.to_bf16.resize(n);
    ops->copy(r.to_bf16.data(), DType::BF16, a.data(), DType::F32, n);
    r.sum = a;
    ops->add(r.sum.data(), DType::F32, gb.data(), DType::BF16, n);
    r.nonfinite = ops->count_nonfinite(bad.data(), DType::F32, n);
    ops->accumulate_nonfinite(bad.data(), DType::F32, n, &r.over_half, 0.5f);
    r.p = a, r.m = m0, r.v = v0;
    ops->adamw(r.p.data(), g.data(), DType::F32, r.m.data(), r.v.data(), n, c, 1e-3f, 1, true, 0.5f);
    r.pb = a;
    std::vector<float> mb = m0, vb = v0;
    ops->adamw(r.pb.data(), gb.data(), DType::BF16, mb.data(), vb.data(), n, c, 1e-3f, 1, false, 1.0f);
    r.high.resize(n), r.low.resize(n);
    ops->split_master(r.high.data(), r.low.data(), a.data(), n);
    std::vector<float> ms = m0, vs = v0;
    ops->adamw_split(r.high.data(), r.low.data(), gb.data(), DType::BF16, ms.data(), vs.data(), n, c, 1e-3f, 1, true, 1.0f);
    r.p_split.resize(n);
    ops->join_master(r.p_split.data(), r.high.data(), r.low.data(), n);
    return r;
  };
  const Result one = run(1);
  // Against what the test plants and a plain loop.
  EXPECT_EQ(one.nonfinite, 7u);
  EXPECT_EQ(one.over_half, double(planted_limit(0.5f)));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(one.to_bf16[i], math::f32_to_bf16(a[i])) << i;
    ASSERT_EQ(one.sum[i], a[i] + math::bf16_to_f32(gb[i])) << i;
  }
  // The whole range updated: AdamW's first step from m = v = 0 moves every element by about lr.
  size_t unmoved = 0;
  for (size_t i = 0; i < n; ++i) unmoved += (one.p[i] == a[i]) + (one.pb[i] == a[i]) + (one.p_split[i] == a[i]);
  EXPECT_EQ(unmoved, 0u);
  for (const int threads : {3, 5}) {
    const Result r = run(threads);
    EXPECT_TRUE(same_bits(one.to_bf16, r.to_bf16)) << "copy at " << threads << " threads";
    EXPECT_TRUE(same_bits(one.sum, r.sum)) << "add at " << threads << " threads";
    EXPECT_EQ(one.nonfinite, r.nonfinite) << threads << " threads";
    EXPECT_EQ(one.over_half, r.over_half) << threads << " threads";
    EXPECT_TRUE(same_bits(one.p, r.p) && same_bits(one.m, r.m) && same_bits(one.v, r.v)) << "adamw at " << threads;
    EXPECT_TRUE(same_bits(one.pb, r.pb)) << "adamw, bf16 gradients, at " << threads << " threads";
    EXPECT_TRUE(same_bits(one.high, r.high) && same_bits(one.low, r.low)) << "adamw_split at " << threads;
  }
}

// The sums of squares over 300,001 elements (four blocks of 64 Ki and a short fifth, sum_squares' cut): the same
// bits at 1, 3 and 5 threads; the fp64 sums within 1e-12 of long double ones (a lane adds at most 8,192 terms a
// block, then 8 lanes and 5 blocks: at most 8,205 roundings of 2^-53 each, 9.1e-13); the fixed-point sum, added
// onto a running one, the same words as a loop here adding each square in turn (integers: exact).
TEST(CpuOps, NonfiniteRunsCountEachRunIntoItsOwnAccumulatorAndRefuseEndsThatGoBack) {
  // Runs [0, 3), [3, 3) (empty), [3, 8): NaN at 1, inf at 3 and 7, -inf at 5.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.5f, std::nanf(""), 2.0f, inf, 1.0f, -inf, 3.0f, inf};
  const size_t ends[] = {3, 3, 8};
  std::vector<double> acc = {10.0, 20.0, 30.0};
  auto ops = make_cpu_ops(1);
  ops->accumulate_nonfinite_runs(x.data(), DType::F32, ends, 3, acc.data(), inf);
  EXPECT_EQ(acc, (std::vector<double>{11.0, 20.0, 33.0}));
  ops->accumulate_nonfinite_runs(x.data(), DType::F32, ends, 0, acc.data(), inf);  // no runs: nothing
  EXPECT_EQ(acc, (std::vector<double>{11.0, 20.0, 33.0}));
  // Ends that go back are a caller's bug, refused for every backend before any count is added.
  const size_t back[] = {3, 2, 8};
  EXPECT_THROW(ops->accumulate_nonfinite_runs(x.data(), DType::F32, back, 3, acc.data(), inf), InternalError);
  EXPECT_EQ(acc, (std::vector<double>{11.0, 20.0, 33.0}));
}

TEST(CpuOps, SumsOfSquaresAreTheSameBitsAtAnyThreadCount) {
  constexpr size_t n = 300001;
  uint64_t state = 5;
  std::vector<float> f(n);
  std::vector<uint16_t> b(n);
  std::vector<int64_t> q(n);
  long double want = 0, want_b = 0;
  math::FixedSquareSum want_q;
  want_q.add_square(int64_t(1) << 40);  // what the running sum holds before
  for (size_t i = 0; i < n; ++i) {
    f[i] = float(double(splitmix64(state) >> 11) * 0x1p-53 * 8 - 4);
    b[i] = math::f32_to_bf16(f[i]);
    q[i] = math::to_fixed(f[i]);
    want += (long double)f[i] * f[i];
    const float x = math::bf16_to_f32(b[i]);
    want_b += (long double)x * x;
    want_q.add_square(q[i]);
  }
  struct Sums {
    double f32 = 0, bf16 = 0;
    math::FixedSquareSum fixed;
  };
  auto run = [&](int threads) {
    auto ops = make_cpu_ops(threads);
    Sums s;
    s.f32 = ops->sum_squares(f.data(), DType::F32, n);
    s.bf16 = ops->sum_squares(b.data(), DType::BF16, n);
    s.fixed.add_square(int64_t(1) << 40);
    ops->accumulate_fixed_square_sum(q.data(), n, &s.fixed);
    return s;
  };
  const Sums one = run(1);
  EXPECT_NEAR(one.f32, double(want), 1e-12 * double(want));
  EXPECT_NEAR(one.bf16, double(want_b), 1e-12 * double(want_b));
  EXPECT_EQ(std::memcmp(one.fixed.w, want_q.w, sizeof(want_q.w)), 0);
  for (const int threads : {3, 5}) {
    const Sums s = run(threads);
    EXPECT_EQ(std::memcmp(&one.f32, &s.f32, sizeof(double)), 0) << "fp32 sum at " << threads << " threads";
    EXPECT_EQ(std::memcmp(&one.bf16, &s.bf16, sizeof(double)), 0) << "bf16 sum at " << threads << " threads";
    EXPECT_EQ(std::memcmp(one.fixed.w, s.fixed.w, sizeof(want_q.w)), 0) << "fixed-point sum at " << threads << " threads";
  }
}

}  // namespace
}  // namespace zero
