// Qwen3 decoder layer forward/backward from its parts (norms, projections, RoPE, attention, MLP).
#include "model/decoder_layer.h"

#include "model/param_layout.h"
#include "model/rmsnorm.h"

namespace zero::model {

namespace {

AttentionShape attention_shape(const Qwen3Config& c) { return {c.num_heads, c.num_kv_heads, c.head_dim}; }
MlpWeights mlp_weights(std::span<const float* const> w) { return {w[kGateProj], w[kUpProj], w[kDownProj]}; }

}  // namespace

void decoder_layer_forward(const Qwen3Config& c, std::span<const float* const> w, const LayerContext& ctx, const Mat& x,
                           Mat& y, LayerCache& s) {
  const int64_t H = c.hidden_size, D = c.head_dim, N = x.cols();
  const float eps = float(c.rms_norm_eps);

  s.a.resize(H, N);
  s.rstd_in.resize(N);
  rmsnorm_forward(x.data(), w[kInputNorm], H, N, eps, s.a.data(), s.rstd_in.data());

  linear_forward(w[kQProj], c.q_dim(), H, s.a, s.q);  // [heads*d, N]
  linear_forward(w[kKProj], c.kv_dim(), H, s.a, s.k);  // [kv*d, N]
  linear_forward(w[kVProj], c.kv_dim(), H, s.a, s.v);  // [kv*d, N]

  // q_norm/k_norm act per head over head_dim: the [heads*d, N] buffer viewed as [d, heads*N].
  s.qr.resize(c.q_dim(), N);
  s.kr.resize(c.kv_dim(), N);
  s.rstd_q.resize(c.num_heads * N);
  s.rstd_k.resize(c.num_kv_heads * N);
  rmsnorm_forward(s.q.data(), w[kQNorm], D, c.num_heads * N, eps, s.qr.data(), s.rstd_q.data());
  rmsnorm_forward(s.k.data(), w[kKNorm], D, c.num_kv_heads * N, eps, s.kr.data(), s.rstd_k.data());
  rope_forward(s.qr.data(), c.num_heads, *ctx.rope);
  rope_forward(s.kr.data(), c.num_kv_heads, *ctx.rope);

  attention_forward(s.qr, s.kr, s.v, attention_shape(c), ctx.seqs, s.o, &s.probs);
  linear_forward(w[kOProj], H, c.q_dim(), s.o, s.h);
  s.h += x;

  s.b.resize(H, N);
  s.rstd_post.resize(N);
  rmsnorm_forward(s.h.data(), w[kPostNorm], H, N, eps, s.b.data(), s.rstd_post.data());
  mlp_forward(mlp_weights(w), H, c.intermediate_size, s.b, y, s.mlp);
  y += s.h;
}

void decoder_layer_backward(const Qwen3Config& c, std::span<const float* const> w, std::span<float* const> gw,
                            const LayerContext& ctx, const Mat& x, const LayerCache& s, const Mat& dy, Mat& dx) {
  const int64_t H = c.hidden_size, D = c.head_dim, N = x.cols();

  // y = h + mlp(b): dh = dy + norm_post^T(mlp^T dy).
  Mat db, tmp(H, N);
  mlp_backward(mlp_weights(w), {gw[kGateProj], gw[kUpProj], gw[kDownProj]}, H, c.intermediate_size, s.b, s.mlp, dy, db);
  rmsnorm_backward(s.h.data(), w[kPostNorm], s.rstd_post.data(), db.data(), H, N, tmp.data(), gw[kPostNorm]);
  Mat dh = dy + tmp;

  // h = x + o_proj(o).
  Mat d_o;
  linear_backward(w[kOProj], H, c.q_dim(), s.o, dh, gw[kOProj], d_o, false);
  Mat dqr, dkr, dv;
  attention_backward(s.qr, s.kr, s.v, attention_shape(c), ctx.seqs, s.probs, d_o, dqr, dkr, dv);

  // Undo RoPE, then the per-head norms.
  rope_backward(dqr.data(), c.num_heads, *ctx.rope);
  rope_backward(dkr.data(), c.num_kv_heads, *ctx.rope);
  Mat dq(c.q_dim(), N), dk(c.kv_dim(), N);
  rmsnorm_backward(s.q.data(), w[kQNorm], s.rstd_q.data(), dqr.data(), D, c.num_heads * N, dq.data(), gw[kQNorm]);
  rmsnorm_backward(s.k.data(), w[kKNorm], s.rstd_k.data(), dkr.data(), D, c.num_kv_heads * N, dk.data(), gw[kKNorm]);

  Mat da;
  linear_backward(w[kQProj], c.q_dim(), H, s.a, dq, gw[kQProj], da, false);
  linear_backward(w[kKProj], c.kv_dim(), H, s.a, dk, gw[kKProj], da, true);
  linear_backward(w[kVProj], c.kv_dim(), H, s.a, dv, gw[kVProj], da, true);

  dx.resize(H, N);
  rmsnorm_backward(x.data(), w[kInputNorm], s.rstd_in.data(), da.data(), H, N, dx.data(), gw[kInputNorm]);
  dx += dh;
}

}  // namespace zero::model
