// CpuModelOps: every ModelOps hook on host memory, from the Eigen kernels of model/cpu/.
#include "model/cpu/cpu_model_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "core/math/activations.h"
#include "model/attention_tiled.h"
#include "model/cpu/attention_reference.h"
#include "model/cpu/eigen_views.h"
#include "model/cpu/pair_loss.h"
#include "model/cpu/parallel.h"
#include "model/cpu/rmsnorm.h"
#include "model/cpu/rope.h"

namespace zero::model {

namespace {

using namespace cpu;

// A weight as fp32: an fp32 view in place, a bf16 one widened into scratch.
class Fp32Weight {
 public:
  explicit Fp32Weight(const TensorRef& w) {
    if (w.dtype == DType::F32) {
      p_ = w.as<const float>();
      return;
    }
    const bf16* src = w.as<const bf16>();
    scratch_.resize(size_t(w.numel()));
    for (size_t i = 0; i < scratch_.size(); ++i) scratch_[i] = static_cast<float>(src[i]);
    p_ = scratch_.data();
  }
  const float* data() const { return p_; }

 private:
  std::vector<float> scratch_;
  const float* p_ = nullptr;
};

// A gradient computed in fp32: in place for an fp32 view; for bf16, in scratch rounded once to nearest
// even by store().
class Fp32Grad {
 public:
  explicit Fp32Grad(const TensorRef& g) : g_(g) {
    if (g.dtype == DType::BF16) scratch_.resize(size_t(g.numel()));
  }
  float* data() { return g_.dtype == DType::F32 ? g_.as<float>() : scratch_.data(); }
  void store() {
    if (g_.dtype != DType::BF16) return;
    bf16* dst = g_.as<bf16>();
    for (size_t i = 0; i < scratch_.size(); ++i) dst[i] = bf16(scratch_[i]);
  }

 private:
  TensorRef g_;
  std::vector<float> scratch_;
};

// A token activation with packed rows: the tensor itself when it is packed; for a column view (the fused
// q/k/v projection's q, k or v, or their gradients) a packed copy, read in (in) and written back by store().
class PackedRows {
 public:
  enum Use { In, Out };
  PackedRows(const TensorRef& t, Use use) : t_(t) {
    if (t.dense()) return;
    const int64_t cols = t.row_elems();
    copy_.resize(size_t(t.rows() * cols));
    if (use == In)
      for (int64_t r = 0; r < t.rows(); ++r) std::copy_n(f32(t) + r * t.stride(), cols, copy_.data() + r * cols);
  }
  float* data() { return t_.dense() ? f32(t_) : copy_.data(); }
  void store() {
    if (t_.dense()) return;
    const int64_t cols = t_.row_elems();
    for (int64_t r = 0; r < t_.rows(); ++r) std::copy_n(copy_.data() + r * cols, cols, f32(t_) + r * t_.stride());
  }

 private:
  TensorRef t_;
  std::vector<float> copy_;
};

class CpuModelOps final : public ModelOps {
 public:
  CpuModelOps(AttentionKind attention, int threads)
      : tiled_(attention == AttentionKind::Flash || attention == AttentionKind::FlashFma ||
               attention == AttentionKind::FlashWide),
        threads_(std::max(1, threads)) {
    // Our own threads cut the work (parallel.h); Eigen's would order the sums by the thread count.
    Eigen::setNbThreads(1);
  }
  const char* name() const override { return "cpu"; }
  int64_t token_rows(const TokenPlan& plan) const override { return plan.num_tokens(); }

 protected:
  void* do_alloc(size_t bytes) override { return Eigen::internal::aligned_malloc(bytes); }
  void do_free(void* p) override { Eigen::internal::aligned_free(p); }

  void do_to_host(const TensorRef& src, std::span<float> dst) override {
    if (src.dtype == DType::F32) {
      std::memcpy(dst.data(), src.data, dst.size_bytes());
      return;
    }
    ZERO_CHECK(src.dtype == DType::BF16, "to_host: {} tensor", dtype_name(src.dtype));
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(src.as<const bf16>()[i]);
  }

  void do_begin_batch(const TokenPlan& plan, const RopeSpec& rope) override {
    rope_ = make_rope_table(plan.positions, rope.head_dim, rope.theta);
    by_id_ = group_tokens_by_id(plan.tokens);
  }

  // The three products of a linear layer, each cut into tiles of its result (parallel.h: the same bits at
  // any `threads`).
  void do_linear_forward(const TensorRef& x, const TensorRef& w, const TensorRef& y) override {
    const Fp32Weight W(w);
    const WeightMap Wm(W.data(), w.dim(0), w.dim(1));  // [out, in]
    const MatMap X = columns(x);
    MatMap Y = columns(y);
    for_each_tile(threads_, Y.rows(), Y.cols(), [&](int64_t r, int64_t c, int64_t h, int64_t n) {
      Y.block(r, c, h, n).noalias() = Wm.middleRows(r, h) * X.middleCols(c, n);
    });
  }

  void do_linear_input_grad(const TensorRef& dy, const TensorRef& w, const TensorRef& dx, bool accumulate) override {
    const Fp32Weight W(w);
    const WeightMap Wm(W.data(), w.dim(0), w.dim(1));
    const MatMap DY = columns(dy);
    MatMap DX = columns(dx);
    for_each_tile(threads_, DX.rows(), DX.cols(), [&](int64_t r, int64_t c, int64_t h, int64_t n) {
      if (accumulate)
        DX.block(r, c, h, n).noalias() += Wm.middleCols(r, h).transpose() * DY.middleCols(c, n);
      else
        DX.block(r, c, h, n).noalias() = Wm.middleCols(r, h).transpose() * DY.middleCols(c, n);
    });
  }

  void do_linear_weight_grad(const TensorRef& x, const TensorRef& dy, const TensorRef& dw) override {
    Fp32Grad G(dw);
    GradMap Gm(G.data(), dw.dim(0), dw.dim(1));  // [out, in]
    const MatMap X = columns(x), DY = columns(dy);
    for_each_tile(threads_, Gm.rows(), Gm.cols(), [&](int64_t r, int64_t c, int64_t h, int64_t n) {
      Gm.block(r, c, h, n).noalias() = DY.middleRows(r, h) * X.middleRows(c, n).transpose();
    });
    G.store();
  }

  void do_rmsnorm_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                          const TensorRef& rstd) override {
    const Fp32Weight W(w);
    const int64_t H = x.row_elems();
    parallel_rows(threads_, x.rows(), H, [&](int64_t r0, int64_t r1) {
      cpu::rmsnorm_forward(f32(x) + r0 * H, W.data(), H, r1 - r0, eps, f32(y) + r0 * H, f32(rstd) + r0);
    });
  }

  void do_rmsnorm_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                           const TensorRef& dx, const TensorRef& dw) override {
    const Fp32Weight W(w);
    Fp32Grad G(dw);
    cpu::rmsnorm_backward(f32(x), W.data(), f32(rstd), f32(dy), x.row_elems(), x.rows(), f32(dx), G.data(), threads_);
    G.store();
  }

  // The [rows, heads * d] buffer is [rows * heads, d] for the per-head norm (row t * heads + h).
  void do_qk_norm_rope_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                               const TensorRef& rstd) override {
    const int64_t d = w.numel(), heads = x.row_elems() / d;
    const Fp32Weight W(w);
    PackedRows X(x, PackedRows::In);
    parallel_rows(threads_, x.rows() * heads, d, [&](int64_t r0, int64_t r1) {
      cpu::rmsnorm_forward(X.data() + r0 * d, W.data(), d, r1 - r0, eps, f32(y) + r0 * d, f32(rstd) + r0);
    });
    rope_forward(f32(y), heads, rope_, threads_);
  }

  void do_qk_norm_rope_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                                const TensorRef& dx, const TensorRef& dw) override {
    const int64_t d = w.numel(), heads = x.row_elems() / d;
    const Fp32Weight W(w);
    Fp32Grad G(dw);
    Mat dn = columns(dy);  // undo RoPE first, on a copy: dy stays as given
    rope_backward(dn.data(), heads, rope_, threads_);
    PackedRows X(x, PackedRows::In), DX(dx, PackedRows::Out);
    cpu::rmsnorm_backward(X.data(), W.data(), f32(rstd), dn.data(), d, x.rows() * heads, DX.data(), G.data(),
                          threads_);
    DX.store();
    G.store();
  }

  void do_attention_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const AttentionShape& s,
                            const TensorRef& o, const TensorRef& lse) override {
    PackedRows V(v, PackedRows::In);
    if (tiled_) {
      attention_tiled_forward(f32(q), f32(k), V.data(), s, plan().cu_seqlens, plan().hidden, f32(o), f32(lse), {},
                              threads_);
      return;
    }
    attention_reference_forward(f32(q), f32(k), V.data(), s, plan().cu_seqlens, plan().hidden, q.rows(), f32(o),
                                f32(lse), threads_);
  }

  void do_attention_backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                             const TensorRef& d_o, const TensorRef& lse, const AttentionShape& s, const TensorRef& dq,
                             const TensorRef& dk, const TensorRef& dv) override {
    PackedRows V(v, PackedRows::In), DV(dv, PackedRows::Out);
    if (tiled_) {
      attention_tiled_backward(f32(q), f32(k), V.data(), f32(o), f32(d_o), f32(lse), s, plan().cu_seqlens,
                               plan().hidden, f32(dq), f32(dk), DV.data(), {}, threads_);
    } else {
      attention_reference_backward(f32(q), f32(k), V.data(), f32(d_o), s, plan().cu_seqlens, plan().hidden, q.rows(),
                                   f32(dq), f32(dk), DV.data(), threads_);
    }
    DV.store();
  }

  // Row by row: g, u, dg and du may be strided column views.
  void do_swiglu_forward(const TensorRef& g_, const TensorRef& u_, const TensorRef& m_) override {
    const int64_t cols = g_.row_elems();
    parallel_rows(threads_, g_.rows(), cols, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* g = f32(g_) + r * g_.stride();
        const float* u = f32(u_) + r * u_.stride();
        float* m = f32(m_) + r * cols;
        for (int64_t i = 0; i < cols; ++i) m[i] = math::silu(g[i]) * u[i];
      }
    });
  }

  void do_swiglu_backward(const TensorRef& g_, const TensorRef& u_, const TensorRef& dm_, const TensorRef& dg_,
                          const TensorRef& du_) override {
    const int64_t cols = g_.row_elems();
    parallel_rows(threads_, g_.rows(), cols, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* g = f32(g_) + r * g_.stride();
        const float* u = f32(u_) + r * u_.stride();
        const float* dm = f32(dm_) + r * cols;
        float* dg = f32(dg_) + r * dg_.stride();
        float* du = f32(du_) + r * du_.stride();
        for (int64_t i = 0; i < cols; ++i) {
          du[i] = dm[i] * math::silu(g[i]);
          dg[i] = dm[i] * u[i] * math::silu_grad(g[i]);
        }
      }
    });
  }

  void do_add(const TensorRef& a_, const TensorRef& b_, const TensorRef& out_) override {
    const float* a = f32(a_);
    const float* b = f32(b_);
    float* out = f32(out_);
    parallel_rows(threads_, a_.numel(), 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
    });
  }

  void do_embedding_forward(const Piece& table, const TensorRef& x_) override {
    const int64_t H = x_.row_elems();
    float* x = f32(x_);
    const std::vector<int32_t>& tokens = plan().tokens;
    for (const FlatRun& run : table.runs) {
      parallel_rows(threads_, int64_t(tokens.size()), H, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t row = int64_t(tokens[size_t(t)]) * H;
          const int64_t a = std::max(run.begin, row), b = std::min(run.begin + run.count, row + H);
          if (a >= b) continue;
          float* dst = x + t * H + (a - row);
          if (table.dtype == DType::F32) {
            std::memcpy(dst, static_cast<const float*>(run.data) + (a - run.begin), sizeof(float) * (b - a));
          } else {
            const bf16* src = static_cast<const bf16*>(run.data) + (a - run.begin);
            for (int64_t i = 0; i < b - a; ++i) dst[i] = static_cast<float>(src[i]);
          }
        }
      });
    }
  }

  void do_embedding_backward(const TensorRef& dx_, const Piece& dtable) override {
    const int64_t H = dx_.row_elems();
    const float* dx = f32(dx_);
    for (const FlatRun& run : dtable.runs) {
      const int64_t end = run.begin + run.count;
      parallel_rows(threads_, run.count, 1, [&](int64_t i0, int64_t i1) {
        if (dtable.dtype == DType::F32)
          std::fill(static_cast<float*>(run.data) + i0, static_cast<float*>(run.data) + i1, 0.0f);
        else
          std::fill(static_cast<bf16*>(run.data) + i0, static_cast<bf16*>(run.data) + i1, bf16(0.0f));
      });
      // The used ids whose row meets the run, ascending; each sums its tokens' gradients in token order (an id
      // is one thread's: the same bits at any thread count).
      const std::vector<int32_t>& ids = by_id_.ids;
      const int64_t first = std::lower_bound(ids.begin(), ids.end(), run.begin,
                                             [H](int32_t i, int64_t pos) { return int64_t(i) * H + H <= pos; }) -
                            ids.begin();
      const int64_t last = std::lower_bound(ids.begin() + first, ids.end(), end,
                                            [H](int32_t i, int64_t pos) { return int64_t(i) * H < pos; }) -
                           ids.begin();
      parallel_rows(threads_, last - first, H, [&](int64_t u0, int64_t u1) {
        std::vector<float> acc;
        for (int64_t u = first + u0; u < first + u1; ++u) {
          const int64_t row = int64_t(ids[size_t(u)]) * H, a = std::max(run.begin, row), b = std::min(end, row + H);
          acc.assign(size_t(b - a), 0.0f);
          for (int64_t j = by_id_.id_start[size_t(u)]; j < by_id_.id_start[size_t(u) + 1]; ++j) {
            const float* src = dx + int64_t(by_id_.by_id[size_t(j)]) * H + (a - row);
            for (size_t i = 0; i < acc.size(); ++i) acc[i] += src[i];
          }
          if (dtable.dtype == DType::F32) {
            std::copy(acc.begin(), acc.end(), static_cast<float*>(run.data) + (a - run.begin));
          } else {
            bf16* dst = static_cast<bf16*>(run.data) + (a - run.begin);
            for (size_t i = 0; i < acc.size(); ++i) dst[i] = bf16(acc[i]);
          }
        }
      });
    }
  }

  void do_pooled_head_forward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                              const TensorRef& rewards) override {
    const Fp32Weight S(score);
    const Pooled p = pool(x, norm_w, eps);
    const Eigen::Map<const Vec> sv(S.data(), p.xn.rows());
    float* r = f32(rewards);
    for (int64_t s = 0; s < p.xn.cols(); ++s) r[s] = sv.dot(p.xn.col(s));
  }

  void do_pooled_head_backward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                               const TensorRef& drewards, const TensorRef& dx, const TensorRef& d_norm_w,
                               const TensorRef& d_score) override {
    const Fp32Weight S(score), N(norm_w);
    const Pooled p = pool(x, norm_w, eps);
    const int64_t H = p.xn.rows(), Sq = p.xn.cols();
    const Eigen::Map<const Vec> sv(S.data(), H);
    const Eigen::Map<const Vec> dr(f32(drewards), Sq);
    Fp32Grad gs(d_score), gn(d_norm_w);
    Eigen::Map<Vec>(gs.data(), H).noalias() = p.xn * dr;  // d score = sum_s dr_s xn_s
    gs.store();
    Mat dxn = sv * dr.transpose();  // [H, S]
    Mat dhp(H, Sq);
    cpu::rmsnorm_backward(p.hp.data(), N.data(), p.rstd.data(), dxn.data(), H, Sq, dhp.data(), gn.data());
    gn.store();
    MatMap DX = columns(dx);
    DX.setZero();
    for (int64_t s = 0; s < Sq; ++s) DX.col(plan().pooled[s]) += dhp.col(s);
  }

  void do_pair_loss(const TensorRef& rewards, const PairLossInputs& in, const TensorRef& drewards) override {
    const std::span<const float> r(f32(rewards), size_t(rewards.numel()));
    pair_sums_.push_back(drewards.empty() ? cpu::pair_loss(r, in)
                                          : cpu::pair_loss(r, in, std::span<float>(f32(drewards), size_t(drewards.numel()))));
  }
  std::vector<PairStats> do_take_pair_stats() override { return std::exchange(pair_sums_, {}); }

 private:
  // The head's input: the pooled tokens' residual stream and its final norm (recomputed in backward,
  // bit for bit the forward's).
  struct Pooled {
    Mat hp;    // [H, S]
    Vec rstd;  // [S]
    Mat xn;    // [H, S]
  };
  Pooled pool(const TensorRef& x, const TensorRef& norm_w, float eps) const {
    const Fp32Weight N(norm_w);
    const ConstMatMap X(f32(x), x.row_elems(), x.rows());
    const std::vector<int32_t>& pooled = plan().pooled;
    const int64_t H = X.rows(), S = int64_t(pooled.size());
    Pooled p;
    p.hp.resize(H, S);
    for (int64_t s = 0; s < S; ++s) p.hp.col(s) = X.col(pooled[s]);
    p.xn.resize(H, S);
    p.rstd.resize(S);
    cpu::rmsnorm_forward(p.hp.data(), N.data(), H, S, eps, p.xn.data(), p.rstd.data());
    return p;
  }

  bool tiled_;  // model.attention: flash
  int threads_;  // the math threads (pmtrain's `threads`)
  RopeTable rope_;
  TokensById by_id_;  // the batch's tokens grouped by id (embedding backward)
  std::vector<PairStats> pair_sums_;  // one per pair_loss since the last take_pair_stats
};

}  // namespace

std::unique_ptr<ModelOps> make_cpu_model_ops(AttentionKind attention, int threads) {
  return std::make_unique<CpuModelOps>(attention, threads);
}

}  // namespace zero::model
