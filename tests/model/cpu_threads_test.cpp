// The CPU backend's threads (model/cpu/parallel.h): work is cut by its shape alone (literal cuts), every
// item and every element of a tiled result is visited once at any thread count, an item's exception comes
// back to the caller, and the backend's products, attention (reference and tiled), RMSNorm backward and
// q/k-norm + RoPE give the same bits at 1, 2 and 3 threads, the products, RMSNorm's gradients and the rotated
// norm within fp32 rounding of double-precision ones computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "model/attention.h"
#include "model/attention_tiled.h"
#include "model/cpu/attention_reference.h"
#include "model/cpu/cpu_model_ops.h"
#include "model/cpu/parallel.h"
#include "model/token_plan.h"

namespace zero::model {
namespace {

using cpu::for_each_tile;
using cpu::parallel_for;
using cpu::split_side;

TEST(CpuThreads, SidesAreCutByTheirLengthAlone) {
  struct Want {
    int64_t n, parts, size;
  };
  // Up to 512: one tile; beyond, ceil(n / 512) tiles of ceil(n / parts) rounded up to a multiple of 8.
  for (const Want w : {Want{1, 1, 1}, Want{512, 1, 512}, Want{513, 2, 264}, Want{1200, 3, 400}, Want{1201, 3, 408},
                       Want{2048, 4, 512}, Want{4097, 9, 456}}) {
    const cpu::TileSplit s = split_side(w.n);
    EXPECT_EQ(s.parts, w.parts) << "n = " << w.n;
    EXPECT_EQ(s.size, w.size) << "n = " << w.n;
  }
}

TEST(CpuThreads, SmallResultsAreCutIntoAtLeastEightTilesDownTo64) {
  struct Want {
    int64_t rows, cols, row_parts, row_size, col_parts, col_size;
  };
  for (const Want w : {Want{1, 1, 1, 1, 1, 1}, Want{64, 64, 1, 64, 1, 64}, Want{127, 4000, 1, 127, 8, 504},
                       Want{384, 64, 4, 96, 1, 64},  // a small weight's gradient: 384 -> 192 -> 96 rows
                       Want{384, 600, 2, 192, 4, 152}, Want{1200, 2054, 3, 400, 5, 416}}) {
    const cpu::Tiling t = cpu::tiling(w.rows, w.cols);
    EXPECT_EQ(t.rows.parts, w.row_parts) << w.rows << " x " << w.cols;
    EXPECT_EQ(t.rows.size, w.row_size) << w.rows << " x " << w.cols;
    EXPECT_EQ(t.cols.parts, w.col_parts) << w.rows << " x " << w.cols;
    EXPECT_EQ(t.cols.size, w.col_size) << w.rows << " x " << w.cols;
  }
}

TEST(CpuThreads, EveryElementOnceAtAnyThreadCount) {
  for (const int threads : {1, 2, 3, 5}) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {512, 513}, {1100, 37}, {1030, 1030}}) {
      std::vector<int> visits(size_t(rows * cols), 0);
      int64_t tiles = 0;
      for_each_tile(threads, rows, cols, [&](int64_t r0, int64_t c0, int64_t h, int64_t w) {
        EXPECT_LE(h, 512);
        EXPECT_LE(w, 512);
        for (int64_t r = r0; r < r0 + h; ++r)
          for (int64_t c = c0; c < c0 + w; ++c) ++visits[size_t(r * cols + c)];  // tiles are disjoint
#pragma omp atomic
        ++tiles;
      });
      EXPECT_EQ(tiles, cpu::tiling(rows, cols).tiles());
      for (size_t i = 0; i < visits.size(); ++i)
        ASSERT_EQ(visits[i], 1) << threads << " threads, " << rows << " x " << cols << ", element " << i;
    }
  }
}

TEST(CpuThreads, AnItemsExceptionReachesTheCaller) {
  for (const int threads : {1, 3}) {
    std::vector<int> ran(20, 0);
    try {
      parallel_for(threads, 20, [&](int64_t i) {
        ran[size_t(i)] = 1;
        if (i == 4) throw std::runtime_error("item 4 failed");
      });
      ADD_FAILURE() << threads << " threads: no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "item 4 failed");
    }
    EXPECT_EQ(ran[4], 1);
  }
}

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

// Relative L2 distance of a to the double-precision b.
double rel_l2(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A linear layer of 600 outputs over 300 inputs on 700 tokens: its forward is cut into 2 x 4 tiles, its
// input gradient into 2 x 4, its weight gradient into 4 x 2.
TEST(CpuThreads, LinearProductsAreTheSameBitsAtAnyThreadCount) {
  const int64_t T = 700, in = 300, out = 600;
  const std::vector<float> x = random_values(size_t(T * in), 1), w = random_values(size_t(out * in), 2),
                           dy = random_values(size_t(T * out), 3);
  TokenPlan plan;  // one sequence of T tokens
  plan.tokens.assign(size_t(T), 0);
  plan.positions.resize(size_t(T));
  for (int64_t t = 0; t < T; ++t) plan.positions[size_t(t)] = int32_t(t);
  plan.cu_seqlens = {0, int32_t(T)};
  struct Result {
    std::vector<float> y, dx, dw;
  };
  auto run = [&](int threads) {
    const auto ops = make_cpu_model_ops(AttentionKind::Auto, threads);
    ops->begin_batch(plan, {16, 1e6});
    Result r{std::vector<float>(size_t(T * out)), std::vector<float>(size_t(T * in)), std::vector<float>(size_t(out * in))};
    auto ref = [](const std::vector<float>& v, std::initializer_list<int64_t> shape) {
      return TensorRef(const_cast<float*>(v.data()), DType::F32, shape);
    };
    ops->linear_forward(ref(x, {T, in}), ref(w, {out, in}), ref(r.y, {T, out}));
    ops->linear_input_grad(ref(dy, {T, out}), ref(w, {out, in}), ref(r.dx, {T, in}), false);
    ops->linear_weight_grad(ref(x, {T, in}), ref(dy, {T, out}), ref(r.dw, {out, in}));
    return r;
  };
  const Result one = run(1);
  for (const int threads : {2, 3}) {
    const Result r = run(threads);
    EXPECT_TRUE(same_bits(one.y, r.y)) << "forward at " << threads << " threads";
    EXPECT_TRUE(same_bits(one.dx, r.dx)) << "input gradient at " << threads << " threads";
    EXPECT_TRUE(same_bits(one.dw, r.dw)) << "weight gradient at " << threads << " threads";
  }
  // The products themselves, against plain double loops.
  std::vector<double> y(size_t(T * out)), dx(size_t(T * in)), dw(size_t(out * in));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        y[size_t(t * out + o)] += double(x[size_t(t * in + i)]) * w[size_t(o * in + i)];
        dx[size_t(t * in + i)] += double(dy[size_t(t * out + o)]) * w[size_t(o * in + i)];
        dw[size_t(o * in + i)] += double(dy[size_t(t * out + o)]) * x[size_t(t * in + i)];
      }
  EXPECT_LT(rel_l2(one.y, y), 1e-6);
  EXPECT_LT(rel_l2(one.dx, dx), 1e-6);
  EXPECT_LT(rel_l2(one.dw, dw), 1e-6);
}

// Attention, reference and tiled (the FlashAttention-2 emulation), over three sequences (one of 600 tokens),
// 4 q heads on 2 kv heads: forward a (sequence, head) an item, backward a (sequence, kv head), the same bits
// at any thread count.
TEST(CpuThreads, AttentionIsTheSameBitsAtAnyThreadCount) {
  make_cpu_model_ops();  // as every CPU backend: Eigen's own threading off
  const AttentionShape s{.heads = 4, .kv_heads = 2, .head_dim = 16};
  const std::vector<int32_t> cu = {0, 600, 637, 700};
  const int64_t n = cu.back(), qd = s.heads * s.head_dim, kd = s.kv_heads * s.head_dim;
  const std::vector<float> q = random_values(size_t(n * qd), 4), k = random_values(size_t(n * kd), 5),
                           v = random_values(size_t(n * kd), 6), d_o = random_values(size_t(n * qd), 7);
  struct Result {
    std::vector<float> o, lse, dq, dk, dv;
  };
  for (const bool tiled : {false, true}) {
    auto run = [&](int threads) {
      Result r{std::vector<float>(size_t(n * qd)), std::vector<float>(size_t(n * s.heads)),
               std::vector<float>(size_t(n * qd)), std::vector<float>(size_t(n * kd)), std::vector<float>(size_t(n * kd))};
      if (tiled) {
        attention_tiled_forward(q.data(), k.data(), v.data(), s, cu, {}, r.o.data(), r.lse.data(), {}, threads);
        attention_tiled_backward(q.data(), k.data(), v.data(), r.o.data(), d_o.data(), r.lse.data(), s, cu, {},
                                 r.dq.data(), r.dk.data(), r.dv.data(), {}, threads);
      } else {
        cpu::attention_reference_forward(q.data(), k.data(), v.data(), s, cu, {}, n, r.o.data(), r.lse.data(), threads);
        cpu::attention_reference_backward(q.data(), k.data(), v.data(), d_o.data(), s, cu, {}, n, r.dq.data(),
                                          r.dk.data(), r.dv.data(), threads);
      }
      return r;
    };
    const Result one = run(1);
    const char* kind = tiled ? "tiled" : "reference";
    for (const int threads : {2, 3}) {
      const Result r = run(threads);
      EXPECT_TRUE(same_bits(one.o, r.o)) << kind << ", " << threads << " threads";
      EXPECT_TRUE(same_bits(one.lse, r.lse)) << kind << ", " << threads << " threads";
      EXPECT_TRUE(same_bits(one.dq, r.dq)) << kind << ", " << threads << " threads";
      EXPECT_TRUE(same_bits(one.dk, r.dk)) << kind << ", " << threads << " threads";
      EXPECT_TRUE(same_bits(one.dv, r.dv)) << kind << ", " << threads << " threads";
    }
  }
}

// RMSNorm backward over 700 rows of 200 (dx 9 items of 81 rows, dw 4 slices of 64 elements, the last of 8) and
// q/k-norm + RoPE over 700 tokens of 3 heads of 64 (positions restarting at a second sequence): the same bits at
// 1, 2 and 3 threads, RMSNorm's gradients and the rotated norm within fp32 rounding of double-precision ones
// computed here.
TEST(CpuThreads, NormBackwardAndRopeAreTheSameBitsAtAnyThreadCount) {
  const int64_t T = 700, H = 200, heads = 3, d = 64, half = d / 2;
  const float eps = 1e-6f;
  const double theta = 1e6;
  const std::vector<float> x = random_values(size_t(T * H), 8), w = random_values(size_t(H), 9),
                           dy = random_values(size_t(T * H), 10), q = random_values(size_t(T * heads * d), 11),
                           qw = random_values(size_t(d), 12), dq = random_values(size_t(T * heads * d), 13);
  TokenPlan plan;  // sequences of 450 and 250 tokens
  plan.tokens.assign(size_t(T), 0);
  plan.positions.resize(size_t(T));
  for (int64_t t = 0; t < T; ++t) plan.positions[size_t(t)] = int32_t(t < 450 ? t : t - 450);
  plan.cu_seqlens = {0, 450, int32_t(T)};
  struct Result {
    std::vector<float> y, rstd, dx, dw, qy, qrstd, dqx, dqw;
  };
  auto ref = [](const std::vector<float>& v, std::initializer_list<int64_t> shape) {
    return TensorRef(const_cast<float*>(v.data()), DType::F32, shape);
  };
  auto run = [&](int threads) {
    const auto ops = make_cpu_model_ops(AttentionKind::Auto, threads);
    ops->begin_batch(plan, {d, theta});
    Result r{std::vector<float>(size_t(T * H)),         std::vector<float>(size_t(T)),
             std::vector<float>(size_t(T * H)),         std::vector<float>(size_t(H)),
             std::vector<float>(size_t(T * heads * d)), std::vector<float>(size_t(T * heads)),
             std::vector<float>(size_t(T * heads * d)), std::vector<float>(size_t(d))};
    ops->rmsnorm_forward(ref(x, {T, H}), ref(w, {H}), eps, ref(r.y, {T, H}), ref(r.rstd, {T}));
    ops->rmsnorm_backward(ref(x, {T, H}), ref(w, {H}), ref(r.rstd, {T}), ref(dy, {T, H}), ref(r.dx, {T, H}),
                          ref(r.dw, {H}));
    ops->qk_norm_rope_forward(ref(q, {T, heads * d}), ref(qw, {d}), eps, ref(r.qy, {T, heads * d}),
                              ref(r.qrstd, {T * heads}));
    ops->qk_norm_rope_backward(ref(q, {T, heads * d}), ref(qw, {d}), ref(r.qrstd, {T * heads}),
                               ref(dq, {T, heads * d}), ref(r.dqx, {T, heads * d}), ref(r.dqw, {d}));
    return r;
  };
  const Result one = run(1);
  for (const int threads : {2, 3}) {
    const Result r = run(threads);
    EXPECT_TRUE(same_bits(one.dx, r.dx)) << "rmsnorm dx at " << threads << " threads";
    EXPECT_TRUE(same_bits(one.dw, r.dw)) << "rmsnorm dw at " << threads << " threads";
    EXPECT_TRUE(same_bits(one.qy, r.qy)) << "q-norm + RoPE forward at " << threads << " threads";
    EXPECT_TRUE(same_bits(one.dqx, r.dqx)) << "q-norm + RoPE dx at " << threads << " threads";
    EXPECT_TRUE(same_bits(one.dqw, r.dqw)) << "q-norm + RoPE dw at " << threads << " threads";
  }
  // RMSNorm's gradients in double: xhat = x r, dw = sum_t dy xhat, dx = r (dy w - xhat mean(dy w xhat)).
  std::vector<double> dx(size_t(T * H)), dw(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x.data() + t * H;
    const float* dyt = dy.data() + t * H;
    double ss = 0, dot = 0;
    for (int64_t i = 0; i < H; ++i) ss += double(xt[i]) * xt[i];
    const double r = 1.0 / std::sqrt(ss / double(H) + eps);
    for (int64_t i = 0; i < H; ++i) dot += double(dyt[i]) * w[size_t(i)] * xt[i] * r;
    for (int64_t i = 0; i < H; ++i) {
      dw[size_t(i)] += double(dyt[i]) * xt[i] * r;
      dx[size_t(t * H + i)] = r * (double(dyt[i]) * w[size_t(i)] - xt[i] * r * dot / double(H));
    }
  }
  EXPECT_LT(rel_l2(one.dx, dx), 1e-5);
  EXPECT_LT(rel_l2(one.dw, dw), 1e-5);
  // q-norm + RoPE forward in double (HF's fp32 angle inv_freq * position, its cos and sin in double).
  std::vector<double> qy(size_t(T * heads * d));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const float* v = q.data() + (t * heads + h) * d;
      double ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += double(v[i]) * v[i];
      const double r = 1.0 / std::sqrt(ss / double(d) + eps);
      double* y = qy.data() + (t * heads + h) * d;
      for (int64_t i = 0; i < half; ++i) {
        const double a = v[i] * r * qw[size_t(i)], b = v[i + half] * r * qw[size_t(i + half)];
        const float inv_freq = float(1.0 / std::pow(theta, double(float(2 * i) / float(d))));
        const double angle = double(inv_freq * float(plan.positions[size_t(t)]));
        y[i] = a * std::cos(angle) - b * std::sin(angle);
        y[i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  EXPECT_LT(rel_l2(one.qy, qy), 1e-5);
}

}  // namespace
}  // namespace zero::model
