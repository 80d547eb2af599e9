// One Qwen3 pre-norm decoder layer over the token rows of a batch, as a sequence of ModelOps calls:
//   h = x + o_proj(attn(rope(q_norm(q_proj(a))), rope(k_norm(k_proj(a))), v_proj(a))), a = input_layernorm(x)
//   y = h + down_proj(silu(gate_proj(b)) * up_proj(b)), b = post_attention_layernorm(h)
// Forward keeps what backward needs in LayerActivations (or, for selective recompute, all but the
// element-wise tensors, which decoder_layer_rematerialise rebuilds before backward); backward writes the
// layer's weight gradients. Backend-free: every tensor is a view, every computation an op.
#pragma once
#include <span>

#include "model/model_ops.h"
#include "model/qwen3_config.h"

namespace zero::model {

// Activations saved by forward for backward, in the backend's memory (R = token rows). Under
// LayerKeep::WithoutElementwise, a, qr, kr, b and m are empty between forward and rematerialise.
struct LayerActivations {
  Activation rstd_in;      // [R] input_layernorm
  Activation a;            // [R, H] input_layernorm(x)
  Activation q, k, v;      // [R, heads*d], [R, kv*d] projections (q, k before q_norm/k_norm)
  Activation rstd_q, rstd_k;  // [R*heads], [R*kv]
  Activation qr, kr;       // after the norms and RoPE
  Activation o, lse;       // [R, heads*d] attention output before o_proj; [R, heads]
  Activation h;            // [R, H] residual after attention
  Activation rstd_post;    // [R]
  Activation b;            // [R, H] post_attention_layernorm(h)
  Activation g, u, m;      // [R, I] gate_proj(b), up_proj(b), silu(g) * u; when one GEMM made both (their
                           // weights back to back), g is [R, 2I] = [gate | up] and u is empty
};

// What decoder_layer_forward leaves in LayerActivations: everything backward reads, or everything but
// the element-wise tensors a, qr, kr, b and m (selective recompute: freed as soon as forward has used
// them, so the layer keeps the GEMM and attention outputs, h and the statistics).
enum class LayerKeep : uint8_t { All, WithoutElementwise };

// Attention in decoder_layer_forward: computed into saved.o and saved.lse, or (a fully checkpointed layer's
// recompute, activation_checkpointing.h) already there from the layer's first forward, which kept them:
// the same tensors bit for bit, one attention forward fewer.
enum class LayerAttention : uint8_t { Compute, Given };

// weights / grads: one view per tensor in LayerTensor order (param_layout.h).
// x: [R, H] -> y: [R, H]; y may not alias x.
void decoder_layer_forward(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> weights, const TensorRef& x,
                           const TensorRef& y, LayerActivations& saved, LayerKeep keep = LayerKeep::All,
                           LayerAttention attention = LayerAttention::Compute);

// Rebuilds what a LayerKeep::WithoutElementwise forward dropped (a, qr, kr, b, m, in that order) from x
// and the kept tensors with forward's own ops on the same inputs, so bit for bit what forward computed.
// The rstd vectors are rewritten with the same values (the norm ops produce both).
void decoder_layer_rematerialise(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> weights,
                                 const TensorRef& x, LayerActivations& saved);

// dy: [R, H] -> dx: [R, H] (overwritten); the layer's gradients overwritten. x is the layer input.
void decoder_layer_backward(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> weights,
                            std::span<const TensorRef> grads, const TensorRef& x, const LayerActivations& saved,
                            const TensorRef& dy, const TensorRef& dx);

}  // namespace zero::model
