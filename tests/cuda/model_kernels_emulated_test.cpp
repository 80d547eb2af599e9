// The reward model's CUDA kernels (model/cuda/model_kernels.cu) without a GPU: the file itself, launchers
// included, compiled as host C++ and run under the SIMT emulator (simt_emulator.h: every CUDA thread a
// fiber, __syncthreads a barrier, __shared__ arrays per block), each launcher against a reference written
// here in double precision from the definitions (shares no code with the kernels):
//   RMSNorm y = w x / sqrt(mean(x^2) + eps), and with RoPE the normed row rotated (rotate_half) by the
//   token's angles; its backward dx = (dxhat - xhat mean(xhat dxhat)) rstd with dxhat = dy w (dy rotated
//   back first with RoPE), dw = sum over rows of dy xhat; SwiGLU m = silu(g) u and its backward; add;
//   the embedding gather and its gradient over a run of the table; the pooled score head
//   r = score . norm(x[pooled]) and its backward; the pairwise loss softplus(r_rejected - r_chosen).
// Relative L2 per output <= 1e-6 in fp32 (fixed-order fp32 sums against exact ones), <= 1e-2 where the
// kernel stores bf16. Shapes put rows wider and narrower than a 256-thread block, more rows than blocks,
// and element counts past one grid-stride pass. Outputs start as NaN where the kernel must write them all.
#include "tests/cuda/simt_emulator.h"  // first: the kernel file below compiles against it

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "model/cuda/model_kernels.cu"  // NOLINT: the kernels' own source, launchers included
#include "tests/common/exact_attention.h"

namespace zero::model::cuda_kernels {
namespace {

using testing::rel_l2;

std::vector<float> draw(int64_t n, float spread, uint64_t seed) {
  uint64_t state = seed;
  return testing::uniform(n, spread, state);
}
std::vector<float> from_bf16(const std::vector<uint16_t>& b) {
  std::vector<float> x(b.size());
  for (size_t i = 0; i < b.size(); ++i) x[i] = math::bf16_to_f32(b[i]);
  return x;
}

void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                  double tol) {
  const double err = rel_l2(got, want);
  std::printf("  %-44s rel L2 %.2e (bound %.0e)\n", what.c_str(), err, tol);
  EXPECT_LE(err, tol) << what;
}

// RoPE angles of `tokens` tokens, half = head_dim / 2 per token: cos, sin tables [tokens, half].
struct Rope {
  std::vector<float> cos, sin;
};
Rope rope_tables(int64_t tokens, int64_t half) {
  Rope r;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(t + 1) * std::pow(1e4, -double(i) / double(half));
      r.cos.push_back(float(std::cos(angle)));
      r.sin.push_back(float(std::sin(angle)));
    }
  return r;
}

struct NormCase {
  int64_t rows, dim, heads;  // heads > 0: rows are (token, head) rows with RoPE
  int64_t pad = 0;           // x and dx as column views: each token's row `pad` elements wider
  bool residual = false;     // dx = a residual (laid out as dx, fp32) + the norm's input gradient
};

void check_norm(const NormCase& c, bool bf16_out) {
  const float eps = 1e-6f;
  const int64_t n = c.rows * c.dim, half = c.dim / 2;
  const std::vector<float> res = draw(n, 1.0f, 14 + c.dim);
  const std::vector<float> x = draw(n, 2.0f, 11 + c.dim), w = draw(c.dim, 1.5f, 12 + c.dim),
                           dy = draw(n, 1.0f, 13 + c.dim);
  const bool rope = c.heads > 0;
  const Rope t = rope ? rope_tables(c.rows / c.heads, half) : Rope{};
  const float* cos = rope ? t.cos.data() : nullptr;
  const float* sin = rope ? t.sin.data() : nullptr;
  const std::string name = "norm rows " + std::to_string(c.rows) + " dim " + std::to_string(c.dim) +
                           (rope ? " rope" : "") + (c.residual ? " + residual" : "") + (bf16_out ? " bf16" : " fp32");

  // Reference.
  std::vector<double> y(n), rstd(c.rows), dx(n), dw(c.dim, 0.0);
  for (int64_t r = 0; r < c.rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < c.dim; ++i) ss += double(x[r * c.dim + i]) * x[r * c.dim + i];
    rstd[r] = 1.0 / std::sqrt(ss / double(c.dim) + eps);
    std::vector<double> yn(c.dim), dn(c.dim);
    for (int64_t i = 0; i < c.dim; ++i) yn[i] = w[i] * x[r * c.dim + i] * rstd[r];
    for (int64_t i = 0; i < c.dim; ++i) dn[i] = dy[r * c.dim + i];
    if (rope) {
      const int64_t tok = r / c.heads;
      for (int64_t i = 0; i < half; ++i) {
        const double cs = t.cos[tok * half + i], sn = t.sin[tok * half + i];
        const double a = yn[i], b = yn[i + half], da = dn[i], db = dn[i + half];
        yn[i] = a * cs - b * sn, yn[i + half] = b * cs + a * sn;
        dn[i] = da * cs + db * sn, dn[i + half] = db * cs - da * sn;  // the rotation's transpose
      }
    }
    double dot = 0;
    for (int64_t i = 0; i < c.dim; ++i) {
      y[r * c.dim + i] = yn[i];
      const double xhat = x[r * c.dim + i] * rstd[r];
      dot += xhat * dn[i] * w[i];
      dw[i] += dn[i] * xhat;
    }
    for (int64_t i = 0; i < c.dim; ++i) {
      const double xhat = x[r * c.dim + i] * rstd[r];
      dx[r * c.dim + i] = (dn[i] * w[i] - xhat * dot / double(c.dim)) * rstd[r] + (c.residual ? res[r * c.dim + i] : 0.0);
    }
  }

  // Kernels: x, w, dy fp32; y, dx, dw fp32 or bf16. With a pad, x and dx are columns [pad, pad + width) of
  // token rows pad + width wide (width: the token's heads x dim), the columns around them never touched.
  const Elem ot = bf16_out ? Elem::BF16 : Elem::F32;
  const int64_t width = (rope ? c.heads : 1) * c.dim, tokens = n / width, ld = width + c.pad;
  std::vector<float> xw(size_t(tokens * ld), 1e30f), resw(size_t(tokens * ld), 1e30f);
  for (int64_t t = 0; t < tokens; ++t) std::copy_n(x.data() + t * width, width, xw.data() + t * ld + c.pad);
  for (int64_t t = 0; t < tokens; ++t) std::copy_n(res.data() + t * width, width, resw.data() + t * ld + c.pad);
  std::vector<float> yf(n, NAN), rs(c.rows, NAN), dxf(size_t(tokens * ld), NAN), dwf(c.dim, NAN);
  std::vector<uint16_t> yb(n, 0xffff), dxb(size_t(tokens * ld), 0xffff), dwb(c.dim, 0xffff);
  std::vector<float> partials(size_t(norm_partial_blocks(c.rows, c.dim) * c.dim), NAN);
  void* yp = bf16_out ? static_cast<void*>(yb.data()) : yf.data();
  void* dxp = bf16_out ? static_cast<void*>(dxb.data()) : dxf.data();
  void* dwp = bf16_out ? static_cast<void*>(dwb.data()) : dwf.data();
  const int64_t x_ld = c.pad ? ld : 0;
  const int64_t dx_off = c.pad * (bf16_out ? 2 : 4);
  norm_forward(xw.data() + c.pad, Elem::F32, w.data(), Elem::F32, c.rows, c.dim, eps, yp, ot, rs.data(), cos, sin,
               c.heads, nullptr, x_ld);
  norm_backward(xw.data() + c.pad, Elem::F32, w.data(), Elem::F32, rs.data(), dy.data(), Elem::F32, c.rows, c.dim,
                static_cast<char*>(dxp) + dx_off, ot, partials.data(), dwp, ot, cos, sin, c.heads, nullptr, x_ld, x_ld,
                c.residual ? resw.data() + c.pad : nullptr, Elem::F32);
  const double tol = bf16_out ? 1e-2 : 1e-6;
  expect_close(name + ": y", bf16_out ? from_bf16(yb) : yf, y, tol);
  expect_close(name + ": rstd", rs, rstd, 1e-6);
  // dx's columns back into packed rows; the pad columns still hold their sentinels.
  const std::vector<float> dxw = bf16_out ? from_bf16(dxb) : dxf;
  std::vector<float> dxg(n);
  for (int64_t t = 0; t < tokens; ++t) {
    std::copy_n(dxw.data() + t * ld + c.pad, width, dxg.data() + t * width);
    for (int64_t i = 0; i < c.pad; ++i) EXPECT_TRUE(std::isnan(dxw[t * ld + i])) << name << ": dx pad written";
  }
  expect_close(name + ": dx", dxg, dx, tol);
  expect_close(name + ": dw", bf16_out ? from_bf16(dwb) : dwf, dw, tol);
}

// Rows up to 256 elements go to a warp each (8 a block), wider rows to a block; each thread holds the
// elements lane, lane + group, ... (K of them), RoPE in registers when the row fills them exactly (dim = 32 K
// or 256 K, K even), else through shared memory. The shapes cover each path, rows that leave threads with
// nothing (dim below the group), and more rows than the backward's groups (1024 blocks: each group then takes
// several rows and sums its dw part over them).
TEST(ModelKernelsEmulated, RmsNormForwardAndBackward) {
  check_norm({5, 96, 0}, false);     // a warp a row, 3 elements a lane
  check_norm({300, 600, 0}, false);  // a block a row, 3 of its 4 slots a thread used
  check_norm({7, 600, 0}, true);
  check_norm({1100, 300, 0}, false);  // more rows than backward blocks (1024): a block takes two
  check_norm({3, 2048, 0}, false);    // Qwen3-1.7B's hidden: 8 a thread, exactly
  check_norm({2, kMaxNormDim, 0}, false);
  check_norm({12, 16, 4}, false);    // q/k-norm + RoPE: 3 tokens x 4 heads of head_dim 16 (shared memory)
  check_norm({12, 12, 4}, false);    // the fixtures' head_dim 12: pairs (i, i + 6) across lanes
  check_norm({12, 128, 2}, true);    // Qwen3's head_dim 128: 4 a lane, RoPE in registers
  check_norm({8200, 128, 4}, false);  // more rows than the backward's warps (8192)
  check_norm({6, 512, 2}, false);     // a block a row, RoPE in registers
  check_norm({6, 300, 3}, true);      // a block a row, RoPE through shared memory
  // The residual stream's gradient added as dx is stored (rmsnorm_backward_add): a warp's rows, a block's,
  // and column views.
  check_norm({40, 96, 0, 0, true}, false);
  check_norm({5, 2048, 0, 0, true}, false);
  check_norm({5, 96, 0, 40, true}, false);
  // x and dx as column views: k's columns of a fused [q | k | v] row (q: 8 heads of 16 before them, v after
  // them: the pad here puts q's columns before and leaves v's beyond the last row's end), and a plain norm
  // over a view.
  check_norm({12, 16, 4, 8 * 16}, false);
  check_norm({12, 128, 2, 3 * 128}, true);
  check_norm({5, 96, 0, 40}, false);
}

TEST(ModelKernelsEmulated, SwiGluAddAndConvert) {
  const int64_t n = 333 * 9;  // rows wider than a block
  const std::vector<float> g = draw(n, 4.0f, 21), u = draw(n, 2.0f, 22), dm = draw(n, 1.0f, 23);
  std::vector<double> m(n), dg(n), du(n), sum(n);
  for (int64_t i = 0; i < n; ++i) {
    const double s = 1.0 / (1.0 + std::exp(-double(g[i]))), silu = g[i] * s;
    m[i] = silu * u[i];
    du[i] = dm[i] * silu;
    dg[i] = dm[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
    sum[i] = double(g[i]) + u[i];
  }
  std::vector<float> mf(n, NAN), dgf(n, NAN), duf(n, NAN), sf(n, NAN);
  // Packed g, u: n elements as rows of `cols` (a row wider than the block).
  const int64_t cols = 333, rows = n / cols;
  ASSERT_EQ(rows * cols, n);
  swiglu_forward({rows, cols, cols, cols, 0, 0}, g.data(), u.data(), mf.data(), Elem::F32, nullptr);
  swiglu_backward({rows, cols, cols, cols, cols, cols}, g.data(), u.data(), dm.data(), dgf.data(), duf.data(), Elem::F32,
                  nullptr);
  add(g.data(), u.data(), sf.data(), Elem::F32, n, nullptr);
  expect_close("swiglu m", mf, m, 1e-6);
  expect_close("swiglu dg", dgf, dg, 1e-6);
  expect_close("swiglu du", duf, du, 1e-6);
  expect_close("add", sf, sum, 1e-7);
  // The fused gate/up layout: each row [g | u] of 2 x cols, and its gradient [dg | du] likewise.
  std::vector<float> gu(2 * n), dgu(2 * n, NAN), m2(n, NAN);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) gu[r * 2 * cols + c] = g[r * cols + c], gu[r * 2 * cols + cols + c] = u[r * cols + c];
  swiglu_forward({rows, cols, 2 * cols, 2 * cols, 0, 0}, gu.data(), gu.data() + cols, m2.data(), Elem::F32, nullptr);
  swiglu_backward({rows, cols, 2 * cols, 2 * cols, 2 * cols, 2 * cols}, gu.data(), gu.data() + cols, dm.data(),
                  dgu.data(), dgu.data() + cols, Elem::F32, nullptr);
  std::vector<float> dg2(n), du2(n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dg2[r * cols + c] = dgu[r * 2 * cols + c], du2[r * cols + c] = dgu[r * 2 * cols + cols + c];
  expect_close("swiglu m (fused gate/up rows)", m2, m, 1e-6);
  expect_close("swiglu dg (fused gate/up rows)", dg2, dg, 1e-6);
  expect_close("swiglu du (fused gate/up rows)", du2, du, 1e-6);
  // In place (out aliases a), as the residual stream uses it.
  std::vector<float> acc = g;
  add(acc.data(), u.data(), acc.data(), Elem::F32, n, nullptr);
  expect_close("add in place", acc, sum, 1e-7);
}

// The packed SwiGLU and add kernels (16 bytes a thread) give the scalar kernels' bits: the same rows through both, the
// scalar ones reached with every tensor one element off 16-byte alignment. The fused gate/up layout, bf16 and
// fp32, columns past one block's reach (a thread loops).
template <typename T>
void packed_equals_scalar(Elem t, int width) {
  const int64_t rows = 5, cols = 8 * 40, ld = 2 * cols;
  std::vector<float> src = draw(rows * ld, 4.0f, 31), dsrc = draw(rows * cols, 1.0f, 32);
  auto as_t = [](float x) -> T {
    if constexpr (sizeof(T) == 2) {
      return math::f32_to_bf16(x);
    } else {
      return x;
    }
  };
  // Buffers with room for a 16-byte aligned start and one a single element past it.
  struct Buf {
    std::vector<T> mem;
    T* at(bool aligned) {
      T* p = mem.data();
      while (reinterpret_cast<uintptr_t>(p) % 16 != 0) ++p;
      return aligned ? p : p + 1;
    }
  };
  std::vector<T> outs[2][3];  // [aligned][m, dg | du, the add]
  for (int aligned = 0; aligned < 2; ++aligned) {
    Buf gu{std::vector<T>(rows * ld + 16)}, dm{std::vector<T>(rows * cols + 16)}, m{std::vector<T>(rows * cols + 16)},
        dgu{std::vector<T>(rows * ld + 16)};
    T *pgu = gu.at(aligned), *pdm = dm.at(aligned), *pm = m.at(aligned), *pdgu = dgu.at(aligned);
    for (int64_t i = 0; i < rows * ld; ++i) pgu[i] = as_t(src[i]);
    for (int64_t i = 0; i < rows * cols; ++i) pdm[i] = as_t(dsrc[i]);
    const SwigluRows fwd{rows, cols, ld, ld, 0, 0}, bwd{rows, cols, ld, ld, ld, ld};
    EXPECT_EQ(swiglu_vector_width(bwd, t, {pgu, pgu + cols, pdm, pdgu, pdgu + cols}), aligned ? width : 1);
    swiglu_forward(fwd, pgu, pgu + cols, pm, t, nullptr);
    swiglu_backward(bwd, pgu, pgu + cols, pdm, pdgu, pdgu + cols, t, nullptr);
    outs[aligned][0].assign(pm, pm + rows * cols);
    outs[aligned][1].assign(pdgu, pdgu + rows * ld);
    // The add, in place as the residual stream runs it: dgu += gu.
    EXPECT_EQ(packed_width(t, rows * ld, {pgu, pdgu}), aligned ? width : 1);
    add(pgu, pdgu, pdgu, t, rows * ld, nullptr);
    outs[aligned][2].assign(pdgu, pdgu + rows * ld);
  }
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(outs[0][k].size(), outs[1][k].size());
    EXPECT_EQ(0, std::memcmp(outs[0][k].data(), outs[1][k].data(), outs[0][k].size() * sizeof(T)))
        << (k == 0 ? "m" : k == 1 ? "dg | du" : "add") << ": the packed kernel's bits differ from the scalar kernel's";
  }
}
TEST(ModelKernelsEmulated, PackedSwiGluAndAddGiveTheScalarBits) {
  packed_equals_scalar<uint16_t>(Elem::BF16, 8);
  packed_equals_scalar<float>(Elem::F32, 4);
}

TEST(ModelKernelsEmulated, EmbeddingOverARunOfTheTable) {
  const int64_t vocab = 9, hidden = 300;  // a row wider than the block
  const std::vector<float> table = draw(vocab * hidden, 1.0f, 31);
  const std::vector<int32_t> tokens = {4, 0, 4, 8, 2, 4, 0};
  const int64_t nt = int64_t(tokens.size());
  // A run that starts inside row 2 and ends inside row 5: only those parts are gathered / written.
  const int64_t run_begin = 2 * hidden + 17, run_count = 3 * hidden + 5;
  std::vector<float> x(nt * hidden, 0.0f);
  embedding_forward(table.data() + run_begin, Elem::F32, run_begin, run_count, tokens.data(), nt, hidden, x.data(),
                    Elem::F32, nullptr);
  std::vector<double> want(nt * hidden, 0.0);
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t j = 0; j < hidden; ++j) {
      const int64_t flat = tokens[t] * hidden + j;
      if (flat >= run_begin && flat < run_begin + run_count) want[t * hidden + j] = table[flat];
    }
  expect_close("embedding forward (run)", x, want, 0.0);

  // Backward: the run overwritten with each id's sum of its tokens' dx rows.
  const std::vector<float> dx = draw(nt * hidden, 1.0f, 32);
  std::map<int32_t, std::vector<int32_t>> by;
  for (int32_t t = 0; t < int32_t(nt); ++t) by[tokens[t]].push_back(t);
  std::vector<int32_t> by_id, ids, id_start{0};
  for (const auto& [id, ts] : by) {
    ids.push_back(id);
    by_id.insert(by_id.end(), ts.begin(), ts.end());
    id_start.push_back(int32_t(by_id.size()));
  }
  std::vector<float> run(run_count, NAN);
  embedding_backward(dx.data(), Elem::F32, hidden, by_id.data(), ids.data(), id_start.data(), int64_t(ids.size()),
                     run.data(), Elem::F32, run_begin, run_count, nullptr);
  std::vector<double> grad(run_count, 0.0);
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t j = 0; j < hidden; ++j) {
      const int64_t flat = tokens[t] * hidden + j;
      if (flat >= run_begin && flat < run_begin + run_count) grad[flat - run_begin] += dx[t * hidden + j];
    }
  expect_close("embedding backward (run)", run, grad, 1e-7);
}

TEST(ModelKernelsEmulated, PooledHeadAndPairLoss) {
  const int64_t rows = 40, hidden = 520, seqs = 6;
  const float eps = 1e-6f;
  const std::vector<float> x = draw(rows * hidden, 2.0f, 41), w = draw(hidden, 1.0f, 42), score = draw(hidden, 0.2f, 43),
                           dr = draw(seqs, 1.0f, 44);
  const std::vector<int32_t> pooled = {3, 9, 10, 22, 39, 0};
  std::vector<double> rewards(seqs), dx(rows * hidden, 0.0), dnorm(hidden, 0.0), dscore(hidden, 0.0);
  for (int64_t q = 0; q < seqs; ++q) {
    const float* xr = x.data() + pooled[q] * hidden;
    double ss = 0;
    for (int64_t i = 0; i < hidden; ++i) ss += double(xr[i]) * xr[i];
    const double rs = 1.0 / std::sqrt(ss / double(hidden) + eps);
    double r = 0, dot = 0;
    for (int64_t i = 0; i < hidden; ++i) {
      const double xhat = xr[i] * rs, dxhat = double(score[i]) * dr[q] * w[i];
      r += score[i] * w[i] * xhat;
      dscore[i] += w[i] * xhat * dr[q];
      dnorm[i] += double(score[i]) * dr[q] * xhat;
      dot += xhat * dxhat;
    }
    rewards[q] = r;
    for (int64_t i = 0; i < hidden; ++i) {
      const double xhat = xr[i] * rs, dxhat = double(score[i]) * dr[q] * w[i];
      dx[pooled[q] * hidden + i] = (dxhat - xhat * dot / double(hidden)) * rs;
    }
  }
  std::vector<float> rf(seqs, NAN), dxf(rows * hidden, NAN), dnf(hidden, NAN), dsf(hidden, NAN),
      partials(2 * seqs * hidden, NAN);
  pooled_head_forward(x.data(), Elem::F32, hidden, pooled.data(), seqs, w.data(), Elem::F32, score.data(), Elem::F32,
                      eps, rf.data(), nullptr);
  pooled_head_backward(x.data(), Elem::F32, hidden, pooled.data(), seqs, w.data(), Elem::F32, score.data(), Elem::F32,
                       eps, dr.data(), dxf.data(), Elem::F32, rows, partials.data(), dnf.data(), Elem::F32, dsf.data(),
                       Elem::F32, nullptr);
  expect_close("pooled head rewards", rf, rewards, 1e-6);
  expect_close("pooled head dx (zero off the pooled rows)", dxf, dx, 1e-6);
  expect_close("pooled head d_norm", dnf, dnorm, 1e-6);
  expect_close("pooled head d_score", dsf, dscore, 1e-6);

  // Pairs (0, 1), (2, 3), (4, 5); the middle one masked out. Without margins and centering, then with.
  const std::vector<uint8_t> mask = {1, 0, 1};
  const std::vector<float> margins = {0.5f, -2.0f, 1.25f};
  for (const double center : {0.0, 0.05}) {
    const bool with_margin = center != 0.0;
    std::vector<float> drw(seqs, NAN);
    PairLossSums sums{};
    pair_loss(rf.data(), mask.data(), with_margin ? margins.data() : nullptr, 3, center, drw.data(), &sums, nullptr);
    // -logsigmoid(r_c - r_r - m) + center (r_c + r_r)^2, written out here.
    double loss = 0, chosen = 0, rejected = 0;
    long long correct = 0;
    std::vector<double> dwant(seqs, 0.0);
    for (int i = 0; i < 3; ++i) {
      if (!mask[i]) continue;
      const double rc = rf[2 * i], rr = rf[2 * i + 1], m = with_margin ? margins[i] : 0.0;
      const double z = rr - rc + m;
      loss += std::log1p(std::exp(z)) + center * (rc + rr) * (rc + rr);
      const double sg = 1.0 / (1.0 + std::exp(-z));
      dwant[2 * i] = -sg + 2 * center * (rc + rr), dwant[2 * i + 1] = sg + 2 * center * (rc + rr);
      chosen += rc, rejected += rr, correct += rc > rr;
    }
    SCOPED_TRACE(with_margin ? "margins and centering" : "plain");
    EXPECT_NEAR(sums.loss_sum, loss, 1e-12);
    EXPECT_NEAR(sums.chosen_sum, chosen, 1e-12);
    EXPECT_NEAR(sums.rejected_sum, rejected, 1e-12);
    EXPECT_EQ(sums.real_pairs, 2);
    EXPECT_EQ(sums.correct_pairs, correct);
    expect_close("pair loss d_rewards (0 on the masked pair)", drw, dwant, 1e-7);
  }
}

}  // namespace
}  // namespace zero::model::cuda_kernels
