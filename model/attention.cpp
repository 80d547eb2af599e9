// Causal GQA attention forward/backward, per sequence and head, with Eigen GEMMs.
#include "model/attention.h"

#include <cmath>
#include <limits>

namespace zero::model {

namespace {

// Softmax of column i over rows 0..i of scores [L, L] (keys x queries), in place; rows > i set to 0.
void causal_softmax_columns(Mat& p) {
  const int64_t L = p.cols();
  for (int64_t i = 0; i < L; ++i) {
    auto col = p.col(i);
    const float mx = col.head(i + 1).maxCoeff();
    float sum = 0.0f;
    for (int64_t j = 0; j <= i; ++j) {
      const float e = std::exp(col(j) - mx);
      col(j) = e;
      sum += e;
    }
    col.head(i + 1) *= 1.0f / sum;
    col.tail(L - i - 1).setZero();
  }
}

}  // namespace

void attention_forward(const Mat& q, const Mat& k, const Mat& v, const AttentionShape& s, std::span<const SeqSpan> seqs,
                       Mat& o, std::vector<Mat>* probs) {
  const int64_t d = s.head_dim, r = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(float(d));
  o.resize(s.heads * d, q.cols());
  if (probs) probs->assign(seqs.size() * s.heads, Mat());
  Mat p;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const int64_t off = seqs[si].offset, L = seqs[si].len;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / r;
      auto qh = q.block(h * d, off, d, L);    // [d, L]
      auto kh = k.block(kvh * d, off, d, L);  // [d, L]
      auto vh = v.block(kvh * d, off, d, L);  // [d, L]
      Mat& ph = probs ? (*probs)[si * s.heads + h] : p;
      ph.resize(L, L);
      ph.noalias() = (kh.transpose() * qh) * scale;  // [keys, queries]
      causal_softmax_columns(ph);
      o.block(h * d, off, d, L).noalias() = vh * ph;  // [d, L]
    }
  }
}

void attention_backward(const Mat& q, const Mat& k, const Mat& v, const AttentionShape& s,
                        std::span<const SeqSpan> seqs, const std::vector<Mat>& probs, const Mat& do_, Mat& dq, Mat& dk,
                        Mat& dv) {
  const int64_t d = s.head_dim, r = s.heads / s.kv_heads, N = q.cols();
  const float scale = 1.0f / std::sqrt(float(d));
  dq.setZero(s.heads * d, N);
  dk.setZero(s.kv_heads * d, N);
  dv.setZero(s.kv_heads * d, N);
  Mat dp;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const int64_t off = seqs[si].offset, L = seqs[si].len;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / r;
      const Mat& ph = probs[si * s.heads + h];  // [L keys, L queries]
      auto qh = q.block(h * d, off, d, L);
      auto kh = k.block(kvh * d, off, d, L);
      auto vh = v.block(kvh * d, off, d, L);
      auto doh = do_.block(h * d, off, d, L);
      // o = v p: dv += do p^T, dp = v^T do.
      dv.block(kvh * d, off, d, L).noalias() += doh * ph.transpose();
      dp.resize(L, L);
      dp.noalias() = vh.transpose() * doh;
      // softmax per query column: ds = p * (dp - <p, dp>); masked entries have p = 0 so ds = 0.
      for (int64_t i = 0; i < L; ++i) {
        const float dot = ph.col(i).head(i + 1).dot(dp.col(i).head(i + 1));
        dp.col(i) = ph.col(i).cwiseProduct((dp.col(i).array() - dot).matrix());
      }
      // scores = scale k^T q: dq = scale k ds, dk += scale q ds^T.
      dq.block(h * d, off, d, L).noalias() = (kh * dp) * scale;
      dk.block(kvh * d, off, d, L).noalias() += (qh * dp.transpose()) * scale;
    }
  }
}

}  // namespace zero::model
