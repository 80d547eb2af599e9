// One Qwen3 pre-norm decoder layer over the real tokens of a batch:
//   h = x + o_proj(attn(rope(q_norm(q_proj(a))), rope(k_norm(k_proj(a))), v_proj(a))), a = input_layernorm(x)
//   y = h + mlp(post_attention_layernorm(h))
// Forward keeps what backward needs in a LayerCache; backward writes the layer's weight gradients.
#pragma once
#include <span>
#include <vector>

#include "model/attention.h"
#include "model/mlp.h"
#include "model/qwen3_config.h"
#include "model/rope.h"
#include "model/tensor_views.h"

namespace zero::model {

// What every layer of one micro-batch shares: token layout and RoPE angles.
struct LayerContext {
  std::span<const SeqSpan> seqs;  // sequences as spans of token columns
  const RopeTable* rope = nullptr;
};

// Activations saved by forward for backward (N = real tokens).
struct LayerCache {
  Vec rstd_in;             // [N] input_layernorm
  Mat a;                   // [H, N] input_layernorm(x)
  Mat q, k;                // [heads*d, N], [kv*d, N] projections before q_norm/k_norm
  Vec rstd_q, rstd_k;      // [heads*N], [kv*N]
  Mat qr, kr, v;           // after norm and RoPE; v as projected
  std::vector<Mat> probs;  // attention probabilities per (sequence, head)
  Mat o;                   // [heads*d, N] attention output before o_proj
  Mat h;                   // [H, N] residual after attention
  Vec rstd_post;           // [N]
  Mat b;                   // [H, N] post_attention_layernorm(h)
  MlpCache mlp;
};

// weights / grads: one pointer per tensor in LayerTensor order (param_layout.h).
// x: [H, N] -> y: [H, N]; y may not alias x.
void decoder_layer_forward(const Qwen3Config& c, std::span<const float* const> weights, const LayerContext& ctx,
                           const Mat& x, Mat& y, LayerCache& cache);

// dy: [H, N] -> dx: [H, N] (overwritten); the layer's gradients overwritten. x is the layer input.
void decoder_layer_backward(const Qwen3Config& c, std::span<const float* const> weights, std::span<float* const> grads,
                            const LayerContext& ctx, const Mat& x, const LayerCache& cache, const Mat& dy, Mat& dx);

}  // namespace zero::model
