// The CUDA backend's element-wise kernels (cuda/kernels.cu, the engine's DeviceOps work) without a GPU:
// the file itself, launchers included, compiled as host C++ and run under the SIMT emulator
// (simt_emulator.h), against the CPU side they must equal bit for bit (kernels.h's promise, which the
// engine's CPU/CUDA parity rests on):
//   - copy and add in every (fp32, bf16) pair against the fp32 arithmetic and core/math's bf16 rounding;
//   - AdamW against optim::adamw_step, the CPU backend's optimizer loop, over 3 steps, fp32 and bf16
//     gradients: every master weight, m and v identical;
//   - the two-pass reductions (fp64 sum of squares, non-finite count, also under a limit) against sums taken
//     here, over more elements than the largest first-pass grid covers in one pass; the on-device accumulators;
//   - fixed-point sums (Elem::FX64): copies in and out, adds from fp32, bf16 and fixed point, AdamW on them,
//     against the CPU backend's CpuOps bit for bit, and the exact sum of squares against 128-bit sums here.
#include "tests/cuda/simt_emulator.h"  // first: the kernel file below compiles against it

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <algorithm>
#include <utility>
#include <vector>

#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "cuda/kernels.cu"  // NOLINT: the kernels' own source, launchers included
#include "optim/adamw.h"
#include "zero/device_ops.h"
#include "tests/common/exact_attention.h"

namespace zero::kernels {
namespace {

std::vector<float> draw(int64_t n, float spread, uint64_t seed) {
  uint64_t state = seed;
  return testing::uniform(n, spread, state);
}
std::vector<uint16_t> bf16_of(const std::vector<float>& x) {
  std::vector<uint16_t> b(x.size());
  for (size_t i = 0; i < x.size(); ++i) b[i] = math::f32_to_bf16(x[i]);
  return b;
}
float widen(uint16_t b) { return math::bf16_to_f32(b); }

TEST(CudaKernelsEmulated, CopyAndAddInEveryTypePair) {
  const size_t n = 256 * 3 + 41;
  const std::vector<float> a = draw(n, 3.0f, 1), b = draw(n, 3.0f, 2);
  const std::vector<uint16_t> a16 = bf16_of(a), b16 = bf16_of(b);
  std::vector<uint16_t> c16(n, 0xffff);
  std::vector<float> c32(n, NAN);
  copy(c16.data(), Elem::BF16, a.data(), Elem::F32, n, nullptr);
  EXPECT_EQ(c16, a16);
  copy(c32.data(), Elem::F32, a16.data(), Elem::BF16, n, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(c32[i], widen(a16[i])) << i;
  copy(c32.data(), Elem::F32, a.data(), Elem::F32, n, nullptr);  // same type: a plain copy
  EXPECT_EQ(c32, a);

  std::vector<float> s32 = a;  // fp32 += fp32, fp32 += bf16
  add(s32.data(), Elem::F32, b.data(), Elem::F32, n, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(s32[i], a[i] + b[i]) << i;
  s32 = a;
  add(s32.data(), Elem::F32, b16.data(), Elem::BF16, n, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(s32[i], a[i] + widen(b16[i])) << i;
  std::vector<uint16_t> s16 = a16;  // bf16 += fp32, bf16 += bf16: the fp32 sum rounded once
  add(s16.data(), Elem::BF16, b.data(), Elem::F32, n, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(s16[i], math::f32_to_bf16(widen(a16[i]) + b[i])) << i;
  s16 = a16;
  add(s16.data(), Elem::BF16, b16.data(), Elem::BF16, n, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(s16[i], math::f32_to_bf16(widen(a16[i]) + widen(b16[i]))) << i;
}

TEST(CudaKernelsEmulated, AdamWEqualsTheCpuOptimizerBitForBit) {
  const size_t n = 256 * 5 + 3;
  const optim::AdamWConfig cfg{0.9f, 0.95f, 1e-8f, 0.1f};
  for (bool bf16_grad : {false, true}) {
    std::vector<float> p_gpu = draw(n, 1.0f, 7), m_gpu(n, 0.0f), v_gpu(n, 0.0f);
    std::vector<float> p_cpu = p_gpu, m_cpu = m_gpu, v_cpu = v_gpu;
    for (int64_t t = 1; t <= 3; ++t) {
      std::vector<float> g = draw(n, 0.5f, 100 + t);
      const std::vector<uint16_t> g16 = bf16_of(g);
      if (bf16_grad)
        for (size_t i = 0; i < n; ++i) g[i] = widen(g16[i]);  // what the CPU sees of a bf16 gradient
      const float lr = 1e-3f * float(t), scale = 0.5f;
      adamw(p_gpu.data(), bf16_grad ? static_cast<const void*>(g16.data()) : g.data(),
            bf16_grad ? Elem::BF16 : Elem::F32, m_gpu.data(), v_gpu.data(), n,
            optim::adamw_scalars(cfg, lr, t, /*decay=*/true, scale), nullptr);
      optim::adamw_step(p_cpu.data(), g.data(), m_cpu.data(), v_cpu.data(), n, cfg, lr, t, true, scale);
    }
    EXPECT_EQ(0, std::memcmp(p_gpu.data(), p_cpu.data(), n * 4)) << "params, bf16 grad " << bf16_grad;
    EXPECT_EQ(0, std::memcmp(m_gpu.data(), m_cpu.data(), n * 4)) << "m, bf16 grad " << bf16_grad;
    EXPECT_EQ(0, std::memcmp(v_gpu.data(), v_cpu.data(), n * 4)) << "v, bf16 grad " << bf16_grad;
  }
}

// vector_head (cuda/vector_pack.cuh) at literal addresses: the elements to take one by one before every
// operand lies on a 16-byte boundary, or -1 where none does.
TEST(CudaKernelsEmulated, VectorHeadAlignsEveryOperand) {
  auto at = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };
  EXPECT_EQ(vector_head(8, 100, {{at(0x1000), 4}, {at(0x2000), 2}}), 0);
  EXPECT_EQ(vector_head(8, 100, {{at(0x1004), 4}, {at(0x2002), 2}}), 7);  // 0x1020 and 0x2010
  EXPECT_EQ(vector_head(8, 100, {{at(0x1008), 4}, {at(0x200c), 2}}), 2);  // 0x1010 and 0x2010
  EXPECT_EQ(vector_head(8, 100, {{at(0x1004), 4}, {at(0x2000), 2}}), -1);  // h = 3 mod 4 against h = 0 mod 8
  EXPECT_EQ(vector_head(8, 100, {{at(0x1002), 4}}), -1);  // a float off its own alignment: never
  EXPECT_EQ(vector_head(4, 100, {{at(0x100c), 4}, {at(0x200c), 4}, {at(0x300c), 4}}), 1);
  EXPECT_EQ(vector_head(8, 6, {{at(0x2002), 2}}), -1);  // the head (7) is past the 6 elements
  EXPECT_EQ(vector_head(8, 7, {{at(0x2002), 2}}), 7);
  EXPECT_EQ(vector_head(2, 100, {{at(0x1008), 8}, {at(0x2004), 2}}), -1);  // 0x1010 needs h = 1, 0x2010 h = 6
  // The walk the launchers take: vectors where a head aligns the operands, else one element at a time.
  const Walk vectors = walk_of<8>(100, {{at(0x1004), 4}, {at(0x2002), 2}});
  EXPECT_EQ(vectors.width, 8);
  EXPECT_EQ(vectors.head, 7u);
  EXPECT_EQ(vectors.steps, 13u);
  const Walk singles = walk_of<8>(100, {{at(0x1004), 4}, {at(0x2000), 2}});
  EXPECT_EQ(singles.width, 1);
  EXPECT_EQ(singles.head, 0u);
  EXPECT_EQ(singles.steps, 100u);
  EXPECT_EQ((vector_width<float, Bf16>()), 8);
  EXPECT_EQ((vector_width<float>()), 4);
  EXPECT_EQ((vector_width<Fx64, float>()), 4);
}

// Copy, add, the non-finite count, the sum of squares and AdamW at every offset of their operands into 16-byte-
// aligned buffers and lengths around the vectors' 8 elements: the walk's head, whole vectors and tail, or one
// element at a time where the offsets disagree, each element by the same formula (the emulator stops at a
// misaligned vector access); the sum of squares, whose order is the walk's, to rounding.
// fp32 -> bf16 at literal bit patterns (bf16.h's rule, written out here): ties to even both ways, just past
// and short of a tie, the sign kept, the largest float rounding into inf, a NaN whose payload lies only in
// the low bits quieted to 0x7fc0 (its sign kept), not truncated into inf. Each pattern at every place of
// a 16-byte vector, in the head and the tail (the copy the model's GEMM operands and outputs go through too).
TEST(CudaKernelsEmulated, CopyRoundsLiteralPatternsToNearestEven) {
  const std::vector<std::pair<uint32_t, uint16_t>> cases = {
      {0x3f808000u, 0x3f80u},  // 1 + 2^-8: halfway between 0x3f80 and 0x3f81, to the even 0x3f80
      {0x3f818000u, 0x3f82u},  // halfway between 0x3f81 and 0x3f82, to the even 0x3f82
      {0x3f808001u, 0x3f81u},  // just past halfway: up
      {0x3f807fffu, 0x3f80u},  // just short of it: down
      {0xbf818000u, 0xbf82u},  // negative: ties to even on the magnitude
      {0x7f7fffffu, 0x7f80u},  // the largest float: into inf
      {0x7f800001u, 0x7fc0u},  // a NaN with a low-bits payload only
      {0xff800001u, 0xffc0u},  // and negative
      {0x00000000u, 0x0000u},
  };
  constexpr size_t n = 8 * 9 + 5;  // each case at every place of a vector and a tail
  for (size_t offset = 0; offset < 8; ++offset) {
    SCOPED_TRACE(::testing::Message() << "offset " << offset);
    struct alignas(16) Src { float x[n + 8]; } src{};
    struct alignas(16) Dst { uint16_t x[n + 8]; } dst{};
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = cases[i % cases.size()].first;
      std::memcpy(&src.x[offset + i], &bits, sizeof bits);
    }
    copy(dst.x + offset, Elem::BF16, src.x + offset, Elem::F32, n, nullptr);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(dst.x[offset + i], cases[i % cases.size()].second)
          << std::hex << "f32 0x" << cases[i % cases.size()].first << ", element " << std::dec << i;
  }
}
TEST(CudaKernelsEmulated, EveryOffsetAndLengthGivesTheSameBits) {
  constexpr size_t kMax = 2100, kPad = 8;
  struct alignas(16) Buf32 { float x[kMax + kPad]; };
  struct alignas(16) Buf16 { uint16_t x[kMax + kPad]; };
  auto a32 = std::make_unique<Buf32>(), b32 = std::make_unique<Buf32>(), m32 = std::make_unique<Buf32>(),
       v32 = std::make_unique<Buf32>();
  auto a16 = std::make_unique<Buf16>(), b16 = std::make_unique<Buf16>();
  const std::vector<float> x = draw(kMax + kPad, 3.0f, 31), y = draw(kMax + kPad, 3.0f, 32);
  const std::vector<uint16_t> y16 = bf16_of(y);
  const optim::AdamWConfig cfg{0.9f, 0.95f, 1e-8f, 0.1f};
  int runs = 0;
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(23), size_t(300), kMax}) {
    for (size_t od = 0; od < kPad; ++od) {
      for (size_t os : {od, (od + 1) % kPad, (od + 4) % kPad}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << ", offsets " << od << " (dst) " << os << " (src)");
        float* d32 = a32->x + od;
        const float* s32 = b32->x + os;
        uint16_t* d16 = a16->x + od;
        const uint16_t* s16 = b16->x + os;
        std::copy(y.begin(), y.end(), b32->x);
        std::copy(y16.begin(), y16.end(), b16->x);
        std::fill(std::begin(a32->x), std::end(a32->x), -7.0f);  // what lies outside [0, n) stays
        copy(d32, Elem::F32, s16, Elem::BF16, n, nullptr);  // fp32 <- bf16
        for (size_t i = 0; i < kMax + kPad - od; ++i)
          ASSERT_EQ(d32[i], i < n ? widen(s16[i]) : -7.0f) << "copy f32 <- bf16, element " << i;
        std::fill(std::begin(a16->x), std::end(a16->x), uint16_t(0x1234));
        copy(d16, Elem::BF16, s32, Elem::F32, n, nullptr);  // bf16 <- fp32
        for (size_t i = 0; i < kMax + kPad - od; ++i)
          ASSERT_EQ(d16[i], i < n ? math::f32_to_bf16(s32[i]) : uint16_t(0x1234)) << "copy bf16 <- f32, element " << i;
        std::copy(x.begin(), x.end(), a32->x);
        add(d32, Elem::F32, s16, Elem::BF16, n, nullptr);  // fp32 += bf16: the gradient accumulator
        for (size_t i = 0; i < kMax + kPad - od; ++i)
          ASSERT_EQ(d32[i], i < n ? x[od + i] + widen(s16[i]) : x[od + i]) << "add f32 += bf16, element " << i;
        std::copy(x.begin(), x.end(), a32->x);
        add(d32, Elem::F32, s32, Elem::F32, n, nullptr);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(d32[i], x[od + i] + s32[i]) << "add f32 += f32, element " << i;
        const std::vector<uint16_t> x16 = bf16_of(x);
        std::copy(x16.begin(), x16.end(), a16->x);
        add(d16, Elem::BF16, s16, Elem::BF16, n, nullptr);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(d16[i], math::f32_to_bf16(widen(x16[od + i]) + widen(s16[i]))) << "add bf16 += bf16, element " << i;
        ++runs;
      }
      // The non-finite count, and AdamW against the CPU's loop, with every operand at the same offset and with
      // the gradient one element further on (no head aligns them: one element at a time).
      if (n == 0 || n == 8 || n == 23 || n == kMax) {
        for (size_t og : {od, (od + 1) % kPad}) {
          SCOPED_TRACE(::testing::Message() << "n " << n << ", offset " << od << ", gradient offset " << og);
          std::copy(y16.begin(), y16.end(), b16->x);
          size_t want = 0;
          for (size_t i : {size_t(0), n / 2, n - 1})
            if (i < n) b16->x[og + i] = 0x7fc0, ++want;  // NaN at the walk's ends and middle
          if (n > 0) b16->x[og + n] = 0x7f80;  // inf just past the end: not counted
          std::vector<unsigned long long> partials(kMaxReduceBlocks);
          unsigned long long bad = ~0ull;
          count_nonfinite(b16->x + og, Elem::BF16, n, std::numeric_limits<float>::infinity(), partials.data(), &bad,
                          nullptr);
          EXPECT_EQ(bad, want);
          // The fp64 sum of squares (fp32 and bf16), against one taken here: the walk's order is its own, not
          // this loop's, so equal to rounding.
          std::copy(y16.begin(), y16.end(), b16->x);
          std::copy(y.begin(), y.end(), b32->x);
          std::vector<double> sq_partials(kMaxReduceBlocks);
          for (bool bf16 : {false, true}) {
            double want_sq = 0, got_sq = -1;
            for (size_t i = 0; i < n; ++i) {
              const double e = bf16 ? widen(b16->x[og + i]) : b32->x[og + i];
              want_sq += e * e;
            }
            sum_squares(bf16 ? static_cast<const void*>(b16->x + og) : b32->x + og, bf16 ? Elem::BF16 : Elem::F32, n,
                        sq_partials.data(), &got_sq, nullptr);
            EXPECT_NEAR(got_sq, want_sq, want_sq * 1e-12) << (bf16 ? "bf16" : "fp32");
          }
          std::copy(x.begin(), x.end(), a32->x);
          std::fill(std::begin(m32->x), std::end(m32->x), 0.25f);
          std::fill(std::begin(v32->x), std::end(v32->x), 0.5f);
          std::vector<float> p_cpu(a32->x + od, a32->x + od + n), m_cpu(n, 0.25f), v_cpu(n, 0.5f), g(n);
          for (size_t i = 0; i < n; ++i) g[i] = widen(b16->x[og + i]);
          adamw(a32->x + od, b16->x + og, Elem::BF16, m32->x + od, v32->x + od, n,
                optim::adamw_scalars(cfg, 1e-3f, 2, /*decay=*/true, 0.5f), nullptr);
          optim::adamw_step(p_cpu.data(), g.data(), m_cpu.data(), v_cpu.data(), n, cfg, 1e-3f, 2, true, 0.5f);
          EXPECT_EQ(0, std::memcmp(a32->x + od, p_cpu.data(), n * 4));
          EXPECT_EQ(0, std::memcmp(m32->x + od, m_cpu.data(), n * 4));
          EXPECT_EQ(0, std::memcmp(v32->x + od, v_cpu.data(), n * 4));
          EXPECT_EQ(a32->x[od + n], x[od + n]);  // past the end: untouched
        }
      }
    }
  }
  EXPECT_EQ(runs, 8 * 8 * 3);
}

TEST(CudaKernelsEmulated, ReductionsAndAccumulators) {
  const size_t n = size_t(kReduceThreads) * kMaxReduceBlocks + 1000;  // past one first-pass grid
  std::vector<float> x = draw(int64_t(n), 2.0f, 9);
  const float inf = std::numeric_limits<float>::infinity();
  x[5] = NAN, x[n / 2] = inf, x[n - 1] = -inf;
  std::vector<double> partials(kMaxReduceBlocks, NAN);
  std::vector<unsigned long long> counts(kMaxReduceBlocks, ~0ull);
  unsigned long long bad = ~0ull;
  count_nonfinite(x.data(), Elem::F32, n, inf, counts.data(), &bad, nullptr);
  EXPECT_EQ(bad, 3u);
  const std::vector<uint16_t> x16 = bf16_of(x);
  count_nonfinite(x16.data(), Elem::BF16, n, inf, counts.data(), &bad, nullptr);
  EXPECT_EQ(bad, 3u);
  unsigned long long bad_or_large = ~0ull;
  count_nonfinite(x.data(), Elem::F32, n, 1.5f, counts.data(), &bad_or_large, nullptr);  // and |x| >= 1.5
  size_t over = 0;
  for (float e : x) over += !(std::fabs(e) < 1.5f);
  EXPECT_EQ(bad_or_large, over);
  EXPECT_GT(over, 3u);

  x[5] = 1.0f, x[n / 2] = 2.0f, x[n - 1] = -3.0f;
  double want = 0;
  for (float e : x) want += double(e) * double(e);
  double got = NAN;
  sum_squares(x.data(), Elem::F32, n, partials.data(), &got, nullptr);
  EXPECT_NEAR(got, want, want * 1e-12);
  double acc = 1.5;  // the sum added into an accumulator by the second pass: the bits of the sum, then the add
  sum_squares(x.data(), Elem::F32, n, partials.data(), &acc, nullptr, true);
  EXPECT_EQ(acc, 1.5 + got);
  accumulate_count(&acc, &bad, nullptr);
  EXPECT_EQ(acc, 1.5 + got + 3.0);
  sum_squares(x.data(), Elem::F32, 0, partials.data(), &got, nullptr);  // nothing: 0
  EXPECT_EQ(got, 0.0);
}

TEST(CudaKernelsEmulated, FixedPointSumsEqualTheCpuBackendBitForBit) {
  const size_t n = 256 * 5 + 77;
  const std::vector<float> a = draw(n, 3.0f, 21), b = draw(n, 3.0f, 22);
  const std::vector<uint16_t> b16 = bf16_of(b);
  const std::unique_ptr<DeviceOps> cpu = make_cpu_ops();
  std::vector<int64_t> gpu(n, -1), ref(n, -2);
  copy(gpu.data(), Elem::FX64, a.data(), Elem::F32, n, nullptr);
  cpu->copy(ref.data(), DType::FX64, a.data(), DType::F32, n);
  EXPECT_EQ(gpu, ref);
  for (int k = 0; k < 3; ++k) {  // += fp32, bf16 and fixed point
    add(gpu.data(), Elem::FX64, b.data(), Elem::F32, n, nullptr);
    cpu->add(ref.data(), DType::FX64, b.data(), DType::F32, n);
    add(gpu.data(), Elem::FX64, b16.data(), Elem::BF16, n, nullptr);
    cpu->add(ref.data(), DType::FX64, b16.data(), DType::BF16, n);
  }
  const std::vector<int64_t> twice = gpu;
  add(gpu.data(), Elem::FX64, twice.data(), Elem::FX64, n, nullptr);
  cpu->add(ref.data(), DType::FX64, twice.data(), DType::FX64, n);
  EXPECT_EQ(gpu, ref);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(ref[i], 2 * twice[i]) << i;  // integer adds, no rounding
  std::vector<float> back(n, NAN), back_ref(n, NAN);
  copy(back.data(), Elem::F32, gpu.data(), Elem::FX64, n, nullptr);
  cpu->copy(back_ref.data(), DType::F32, ref.data(), DType::FX64, n);
  EXPECT_EQ(0, std::memcmp(back.data(), back_ref.data(), n * 4));

  // AdamW on fixed-point gradients: the CPU backend's, bit for bit.
  std::vector<float> p_gpu = a, m_gpu(n, 0), v_gpu(n, 0), p_cpu = a, m_cpu(n, 0), v_cpu(n, 0);
  const optim::AdamWConfig c{0.9f, 0.95f, 1e-8f, 0.1f};
  for (int64_t t = 1; t <= 3; ++t) {
    adamw(p_gpu.data(), gpu.data(), Elem::FX64, m_gpu.data(), v_gpu.data(), n, optim::adamw_scalars(c, 1e-3f, t, true, 0.25f),
          nullptr);
    cpu->adamw(p_cpu.data(), ref.data(), DType::FX64, m_cpu.data(), v_cpu.data(), n, c, 1e-3f, t, true, 0.25f);
  }
  EXPECT_EQ(0, std::memcmp(p_gpu.data(), p_cpu.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(m_gpu.data(), m_cpu.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(v_gpu.data(), v_cpu.data(), n * 4));

  // The exact sum of squares, past one first-pass grid, with values near the fixed-point range's top.
  const size_t big = size_t(kReduceThreads) * kMaxReduceBlocks + 3001;
  std::vector<int64_t> q(big);
  uint64_t state = 5;
  for (int64_t& x : q) x = int64_t(splitmix64(state) >> 2) * ((splitmix64(state) & 1) ? 1 : -1);  // |x| < 2^62
  std::vector<math::FixedSquareSum> partials(kMaxReduceBlocks);
  math::FixedSquareSum got;
  got.w[0] = 7;  // accumulated into, not overwritten
  accumulate_fixed_square_sum(q.data(), big, partials.data(), &got, nullptr);
  unsigned __int128 lo = 7;
  uint64_t hi = 0;
  for (int64_t x : q) {
    const unsigned __int128 sq = (unsigned __int128)(x < 0 ? -x : x) * (unsigned __int128)(x < 0 ? -x : x);
    lo += sq;
    hi += lo < sq;
  }
  EXPECT_EQ(got.w[0], uint64_t(lo));
  EXPECT_EQ(got.w[1], uint64_t(lo >> 64));
  EXPECT_EQ(got.w[2], hi);
  EXPECT_GT(hi, 0u);  // the sum did pass 128 bits
}

}  // namespace
}  // namespace zero::kernels
