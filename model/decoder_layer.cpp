// Qwen3 decoder layer forward/backward from its ops (norms, projections, q/k norm + RoPE, attention, SwiGLU).
#include "model/decoder_layer.h"

#include "model/param_layout.h"

namespace zero::model {

namespace {
AttentionShape attention_shape(const Qwen3Config& c) { return {c.num_heads, c.num_kv_heads, c.head_dim}; }
}  // namespace

void decoder_layer_forward(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> w, const TensorRef& x,
                           const TensorRef& y, LayerActivations& s) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, R = x.rows();
  const float eps = float(c.rms_norm_eps);
  const DType act = ops.activation_dtype();  // the residual stream (x, h, y) and the statistics stay fp32

  s.a = ops.alloc({R, H}, act);
  s.rstd_in = ops.alloc({R});
  ops.rmsnorm_forward(x, w[kInputNorm], eps, s.a, s.rstd_in);

  s.q = ops.alloc({R, c.q_dim()}, act);
  s.k = ops.alloc({R, c.kv_dim()}, act);
  s.v = ops.alloc({R, c.kv_dim()}, act);
  ops.linear_forward(s.a, w[kQProj], s.q);
  ops.linear_forward(s.a, w[kKProj], s.k);
  ops.linear_forward(s.a, w[kVProj], s.v);

  s.qr = ops.alloc({R, c.q_dim()}, act);
  s.kr = ops.alloc({R, c.kv_dim()}, act);
  s.rstd_q = ops.alloc({R * c.num_heads});
  s.rstd_k = ops.alloc({R * c.num_kv_heads});
  ops.qk_norm_rope_forward(s.q, w[kQNorm], eps, s.qr, s.rstd_q);
  ops.qk_norm_rope_forward(s.k, w[kKNorm], eps, s.kr, s.rstd_k);

  s.o = ops.alloc({R, c.q_dim()}, act);
  s.lse = ops.alloc({R, c.num_heads});
  ops.attention_forward(s.qr, s.kr, s.v, attention_shape(c), s.o, s.lse);
  s.h = ops.alloc({R, H});
  ops.linear_forward(s.o, w[kOProj], s.h);
  ops.add(s.h, x, s.h);

  s.b = ops.alloc({R, H}, act);
  s.rstd_post = ops.alloc({R});
  ops.rmsnorm_forward(s.h, w[kPostNorm], eps, s.b, s.rstd_post);
  s.g = ops.alloc({R, I}, act);
  s.u = ops.alloc({R, I}, act);
  s.m = ops.alloc({R, I}, act);
  ops.linear_forward(s.b, w[kGateProj], s.g);
  ops.linear_forward(s.b, w[kUpProj], s.u);
  ops.swiglu_forward(s.g, s.u, s.m);
  ops.linear_forward(s.m, w[kDownProj], y);
  ops.add(y, s.h, y);
}

void decoder_layer_backward(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> w,
                            std::span<const TensorRef> gw, const TensorRef& x, const LayerActivations& s,
                            const TensorRef& dy, const TensorRef& dx) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, R = x.rows();
  const DType act = ops.activation_dtype();  // gradients of activations in their dtype; dh and dx fp32

  // y = h + down(m), m = silu(g) * u: dh = dy + post_norm^T(gate^T dg + up^T du).
  Activation dm = ops.alloc({R, I}, act), dg = ops.alloc({R, I}, act), du = ops.alloc({R, I}, act);
  ops.linear_input_grad(dy, w[kDownProj], dm, false);
  ops.linear_weight_grad(s.m, dy, gw[kDownProj]);
  ops.swiglu_backward(s.g, s.u, dm, dg, du);
  dm.reset();
  Activation db = ops.alloc({R, H}, act);
  ops.linear_input_grad(dg, w[kGateProj], db, false);
  ops.linear_weight_grad(s.b, dg, gw[kGateProj]);
  ops.linear_input_grad(du, w[kUpProj], db, true);
  ops.linear_weight_grad(s.b, du, gw[kUpProj]);
  dg.reset();
  du.reset();
  Activation dh = ops.alloc({R, H});
  ops.rmsnorm_backward(s.h, w[kPostNorm], s.rstd_post, db, dh, gw[kPostNorm]);
  ops.add(dy, dh, dh);

  // h = x + o_proj(o).
  Activation d_o = ops.alloc({R, c.q_dim()}, act);
  ops.linear_input_grad(dh, w[kOProj], d_o, false);
  ops.linear_weight_grad(s.o, dh, gw[kOProj]);
  Activation dqr = ops.alloc({R, c.q_dim()}, act), dkr = ops.alloc({R, c.kv_dim()}, act),
             dv = ops.alloc({R, c.kv_dim()}, act);
  ops.attention_backward(s.qr, s.kr, s.v, s.o, d_o, s.lse, attention_shape(c), dqr, dkr, dv);
  d_o.reset();

  // Undo RoPE and the per-head norms, then the projections.
  Activation dq = ops.alloc({R, c.q_dim()}, act), dk = ops.alloc({R, c.kv_dim()}, act);
  ops.qk_norm_rope_backward(s.q, w[kQNorm], s.rstd_q, dqr, dq, gw[kQNorm]);
  ops.qk_norm_rope_backward(s.k, w[kKNorm], s.rstd_k, dkr, dk, gw[kKNorm]);
  Activation da = ops.alloc({R, H}, act);
  ops.linear_input_grad(dq, w[kQProj], da, false);
  ops.linear_weight_grad(s.a, dq, gw[kQProj]);
  ops.linear_input_grad(dk, w[kKProj], da, true);
  ops.linear_weight_grad(s.a, dk, gw[kKProj]);
  ops.linear_input_grad(dv, w[kVProj], da, true);
  ops.linear_weight_grad(s.a, dv, gw[kVProj]);

  ops.rmsnorm_backward(x, w[kInputNorm], s.rstd_in, da, dx, gw[kInputNorm]);
  ops.add(dx, dh, dx);
}

}  // namespace zero::model
