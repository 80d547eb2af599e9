// Causal GQA attention forward/backward, per sequence and head, with Eigen GEMMs.
#include "model/cpu/attention_reference.h"

#include <cmath>

#include "core/math/attention_mask.h"
#include "model/cpu/eigen_views.h"
#include "model/cpu/parallel.h"
#include "model/hidden_span.h"

namespace zero::model::cpu {

namespace {

// p [L keys, L queries]: column i is query i's softmax over the keys it sees (keys 0..i outside the hidden
// span) of scale * k^T q, zero elsewhere. lse (optional, lse_stride apart): each query's log-sum-exp of
// its scaled scores.
template <class Block>
void causal_probs(const Block& qh, const Block& kh, float scale, HiddenSpan hidden, Mat& p, float* lse,
                  int64_t lse_stride) {
  const int64_t L = qh.cols();
  p.resize(L, L);
  p.noalias() = (kh.transpose() * qh) * scale;  // [keys, queries]
  for (int64_t i = 0; i < L; ++i) {
    // Query i sees two runs of keys, [0, h.begin) and [h.end, i]: each exponentiated whole by Eigen's vectorised
    // exp (a scalar std::exp per score had attention at 47% of a small model's CPU step, now 27-31%:
    // bench/results/cpu_softmax.txt).
    const math::HiddenKeys h = math::hidden_keys(i, hidden.begin, hidden.end);
    auto col = p.col(i);
    auto first = col.head(h.begin);
    auto second = col.segment(h.end, i + 1 - h.end);
    float mx = -INFINITY;
    if (first.size() > 0) mx = first.maxCoeff();
    if (second.size() > 0) mx = std::fmax(mx, second.maxCoeff());
    first = (first.array() - mx).exp().matrix();
    second = (second.array() - mx).exp().matrix();
    col.segment(h.begin, h.end - h.begin).setZero();
    const float sum = col.head(i + 1).sum();
    col.head(i + 1) *= 1.0f / sum;
    col.tail(L - i - 1).setZero();
    if (lse) lse[i * lse_stride] = mx + std::log(sum);
  }
}

}  // namespace

void attention_reference_forward(const float* q, const float* k, const float* v, const AttentionShape& s,
                                 std::span<const int32_t> cu_seqlens, std::span<const int32_t> hidden, int64_t n,
                                 float* o, float* lse, int threads) {
  const int64_t d = s.head_dim, r = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(float(d));
  const ConstMatMap Q(q, s.heads * d, n), K(k, s.kv_heads * d, n), V(v, s.kv_heads * d, n);
  MatMap O(o, s.heads * d, n);
  const int64_t seqs = int64_t(cu_seqlens.size()) - 1;
  parallel_for(threads, seqs * s.heads, [&](int64_t item) {
    const int64_t si = item / s.heads, h = item % s.heads, kvh = h / r;
    const int64_t off = cu_seqlens[si], L = cu_seqlens[si + 1] - off;
    Mat p;
    causal_probs(Q.block(h * d, off, d, L), K.block(kvh * d, off, d, L), scale, hidden_span(hidden, si), p,
                 lse + off * s.heads + h, s.heads);
    O.block(h * d, off, d, L).noalias() = V.block(kvh * d, off, d, L) * p;  // [d, L]
  });
}

void attention_reference_backward(const float* q, const float* k, const float* v, const float* d_o,
                                  const AttentionShape& s, std::span<const int32_t> cu_seqlens,
                                  std::span<const int32_t> hidden, int64_t n, float* dq, float* dk, float* dv,
                                  int threads) {
  const int64_t d = s.head_dim, r = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(float(d));
  const ConstMatMap Q(q, s.heads * d, n), K(k, s.kv_heads * d, n), V(v, s.kv_heads * d, n), DO(d_o, s.heads * d, n);
  MatMap DQ(dq, s.heads * d, n), DK(dk, s.kv_heads * d, n), DV(dv, s.kv_heads * d, n);
  DQ.setZero();
  DK.setZero();
  DV.setZero();
  const int64_t seqs = int64_t(cu_seqlens.size()) - 1;
  // A kv head's dk and dv sum over its q heads: one item takes them all, in order.
  parallel_for(threads, seqs * s.kv_heads, [&](int64_t item) {
    const int64_t si = item / s.kv_heads, kvh = item % s.kv_heads;
    const int64_t off = cu_seqlens[si], L = cu_seqlens[si + 1] - off;
    auto kh = K.block(kvh * d, off, d, L);
    auto vh = V.block(kvh * d, off, d, L);
    auto dkh = DK.block(kvh * d, off, d, L);
    auto dvh = DV.block(kvh * d, off, d, L);
    Mat p, dp;
    for (int64_t h = kvh * r; h < (kvh + 1) * r; ++h) {
      auto qh = Q.block(h * d, off, d, L);
      auto doh = DO.block(h * d, off, d, L);
      causal_probs(qh, kh, scale, hidden_span(hidden, si), p, nullptr, 0);  // [L keys, L queries], as in forward
      // o = v p: dv += do p^T, dp = v^T do.
      dvh.noalias() += doh * p.transpose();
      dp.resize(L, L);
      dp.noalias() = vh.transpose() * doh;
      // softmax per query column: ds = p * (dp - <p, dp>); masked entries have p = 0 so ds = 0.
      for (int64_t i = 0; i < L; ++i) {
        const float dot = p.col(i).head(i + 1).dot(dp.col(i).head(i + 1));
        dp.col(i) = p.col(i).cwiseProduct((dp.col(i).array() - dot).matrix());
      }
      // scores = scale k^T q: dq = scale k ds, dk += scale q ds^T.
      DQ.block(h * d, off, d, L).noalias() = (kh * dp) * scale;
      dkh.noalias() += (qh * dp.transpose()) * scale;
    }
  });
}

}  // namespace zero::model::cpu
