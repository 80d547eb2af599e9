// Qwen3 decoder layer forward/backward from its ops (norms, projections, q/k norm + RoPE, attention, SwiGLU).
#include "model/decoder_layer.h"

#include <initializer_list>

#include "core/check.h"
#include "model/param_layout.h"

namespace zero::model {

namespace {
AttentionShape attention_shape(const Qwen3Config& c) { return {c.num_heads, c.num_kv_heads, c.head_dim}; }

// The weights [w0; w1; ...] as one [sum of rows, cols] matrix when each one's memory follows the one
// before, as q/k/v_proj and gate/up_proj (and their gradients) do inside a group's flat region
// (DenseParams, the engine's views): those projections then run as one GEMM each way. Empty when they lie
// apart (tensors staged one by one): a GEMM each.
TensorRef stacked(std::initializer_list<TensorRef> ws) {
  const TensorRef& first = *ws.begin();
  int64_t rows = 0;
  const char* next = static_cast<const char*>(first.data);
  for (const TensorRef& w : ws) {
    if (w.rank != 2 || w.dtype != first.dtype || w.dim(1) != first.dim(1) || !w.dense() || w.data != next) return {};
    rows += w.dim(0);
    next += w.numel() * int64_t(dtype_size(w.dtype));
  }
  return TensorRef(first.data, first.dtype, {rows, first.dim(1)});
}

// The parts of a fused projection's output (or its gradient) as column views: [q | k | v], [gate | up].
struct Qkv {
  TensorRef q, k, v;
};
Qkv qkv_columns(const Qwen3Config& c, const TensorRef& t) {
  return {t.columns(0, c.q_dim()), t.columns(c.q_dim(), c.kv_dim()), t.columns(c.q_dim() + c.kv_dim(), c.kv_dim())};
}
struct GateUp {
  TensorRef gate, up;
};
GateUp gate_up_columns(const TensorRef& t) {
  const int64_t I = t.dim(1) / 2;
  return {t.columns(0, I), t.columns(I, I)};
}

// q_proj(a), k_proj(a), v_proj(a): the columns of one [R, q + 2 kv] tensor in q when one GEMM made them (k
// empty), else the three tensors.
Qkv qkv_of(const Qwen3Config& c, const LayerActivations& s) {
  return s.k.ref().empty() ? qkv_columns(c, s.q) : Qkv{s.q, s.k, s.v};
}
// gate_proj(b), up_proj(b): the halves of one [R, 2I] tensor in g when one GEMM made them (u empty), else g
// and u themselves.
GateUp gate_up_of(const LayerActivations& s) { return s.u.ref().empty() ? gate_up_columns(s.g) : GateUp{s.g, s.u}; }

// The element-wise steps selective recompute repeats: forward and decoder_layer_rematerialise both run
// these, so the recomputed tensors are forward's by construction. Each allocates its output (the rstd
// it writes is allocated by forward and rewritten with the same values on a recompute).

// a = input_layernorm(x)
void normed_input(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> w, const TensorRef& x,
                  LayerActivations& s) {
  s.a = ops.alloc({x.rows(), c.hidden_size}, ops.activation_dtype());
  ops.rmsnorm_forward(x, w[kInputNorm], float(c.rms_norm_eps), s.a, s.rstd_in);
}
// qr, kr = rope(q_norm(q)), rope(k_norm(k))
void rotated_qk(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> w, LayerActivations& s) {
  const int64_t R = s.q.ref().rows();
  const Qkv p = qkv_of(c, s);
  s.qr = ops.alloc({R, c.q_dim()}, ops.activation_dtype());
  s.kr = ops.alloc({R, c.kv_dim()}, ops.activation_dtype());
  ops.qk_norm_rope_forward(p.q, w[kQNorm], float(c.rms_norm_eps), s.qr, s.rstd_q);
  ops.qk_norm_rope_forward(p.k, w[kKNorm], float(c.rms_norm_eps), s.kr, s.rstd_k);
}
// b = post_attention_layernorm(h)
void normed_post(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> w, LayerActivations& s) {
  s.b = ops.alloc({s.h.ref().rows(), c.hidden_size}, ops.activation_dtype());
  ops.rmsnorm_forward(s.h, w[kPostNorm], float(c.rms_norm_eps), s.b, s.rstd_post);
}
// m = silu(g) * u
void gated(ModelOps& ops, const Qwen3Config& c, LayerActivations& s) {
  s.m = ops.alloc({s.g.ref().rows(), c.intermediate_size}, ops.activation_dtype());
  const GateUp p = gate_up_of(s);
  ops.swiglu_forward(p.gate, p.up, s.m);
}
}  // namespace

void decoder_layer_forward(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> w, const TensorRef& x,
                           const TensorRef& y, LayerActivations& s, LayerKeep keep, LayerAttention attention) {
  const int64_t I = c.intermediate_size, R = x.rows();
  const DType act = ops.activation_dtype();  // the residual stream (x, h, y) and the statistics stay fp32
  const bool drop = keep == LayerKeep::WithoutElementwise;

  s.rstd_in = ops.alloc({R});
  normed_input(ops, c, w, x, s);
  if (const TensorRef qkv = stacked({w[kQProj], w[kKProj], w[kVProj]}); !qkv.empty()) {
    s.q = ops.alloc({R, c.q_dim() + 2 * c.kv_dim()}, act);  // [q | k | v]
    ops.linear_forward(s.a, qkv, s.q);
  } else {
    s.q = ops.alloc({R, c.q_dim()}, act);
    s.k = ops.alloc({R, c.kv_dim()}, act);
    s.v = ops.alloc({R, c.kv_dim()}, act);
    ops.linear_forward(s.a, w[kQProj], s.q);
    ops.linear_forward(s.a, w[kKProj], s.k);
    ops.linear_forward(s.a, w[kVProj], s.v);
  }
  if (drop) s.a.reset();

  s.rstd_q = ops.alloc({R * c.num_heads});
  s.rstd_k = ops.alloc({R * c.num_kv_heads});
  rotated_qk(ops, c, w, s);
  if (attention == LayerAttention::Compute) {
    s.o = ops.alloc({R, c.q_dim()}, act);
    s.lse = ops.alloc({R, c.num_heads});
    ops.attention_forward(s.qr, s.kr, qkv_of(c, s).v, attention_shape(c), s.o, s.lse);
  } else {
    ZERO_CHECK(s.o.ref().rows() == R && s.lse.ref().rows() == R, "a layer's kept attention output is not this batch's");
  }
  if (drop) s.qr.reset(), s.kr.reset();
  s.h = ops.alloc({R, c.hidden_size});
  ops.linear_forward_add(s.o, w[kOProj], x, s.h);

  s.rstd_post = ops.alloc({R});
  normed_post(ops, c, w, s);
  if (const TensorRef gate_up = stacked({w[kGateProj], w[kUpProj]}); !gate_up.empty()) {
    s.g = ops.alloc({R, 2 * I}, act);  // [gate | up]
    ops.linear_forward(s.b, gate_up, s.g);
  } else {
    s.g = ops.alloc({R, I}, act);
    s.u = ops.alloc({R, I}, act);
    ops.linear_forward(s.b, w[kGateProj], s.g);
    ops.linear_forward(s.b, w[kUpProj], s.u);
  }
  if (drop) s.b.reset();
  gated(ops, c, s);
  ops.linear_forward_add(s.m, w[kDownProj], s.h, y);
  if (drop) s.m.reset();
}

void decoder_layer_rematerialise(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> w,
                                 const TensorRef& x, LayerActivations& s) {
  normed_input(ops, c, w, x, s);
  rotated_qk(ops, c, w, s);
  normed_post(ops, c, w, s);
  gated(ops, c, s);
}

void decoder_layer_backward(ModelOps& ops, const Qwen3Config& c, std::span<const TensorRef> w,
                            std::span<const TensorRef> gw, const TensorRef& x, const LayerActivations& s,
                            const TensorRef& dy, const TensorRef& dx) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, R = x.rows();
  const DType act = ops.activation_dtype();  // gradients of activations in their dtype; dh and dx fp32

  // y = h + down(m), m = silu(g) * u: dh = dy + post_norm^T(gate^T dg + up^T du). One GEMM each way for
  // gate and up when forward fused them and their weights and gradients lie back to back ([dg | du]).
  const TensorRef gate_up = stacked({w[kGateProj], w[kUpProj]}), gate_up_grad = stacked({gw[kGateProj], gw[kUpProj]});
  const bool fused = s.u.ref().empty() && !gate_up.empty() && !gate_up_grad.empty();
  Activation dm = ops.alloc({R, I}, act), dg, du;
  if (fused) {
    dg = ops.alloc({R, 2 * I}, act);  // [dg | du]
  } else {
    dg = ops.alloc({R, I}, act);
    du = ops.alloc({R, I}, act);
  }
  ops.linear_backward(s.m, w[kDownProj], dy, dm, false, gw[kDownProj]);
  const GateUp gu = gate_up_of(s), dgu = fused ? gate_up_columns(dg) : GateUp{dg, du};
  ops.swiglu_backward(gu.gate, gu.up, dm, dgu.gate, dgu.up);
  dm.reset();
  Activation db = ops.alloc({R, H}, act);
  if (fused) {
    ops.linear_backward(s.b, gate_up, dg, db, false, gate_up_grad);
  } else {
    ops.linear_backward(s.b, w[kGateProj], dg, db, false, gw[kGateProj]);
    ops.linear_backward(s.b, w[kUpProj], du, db, true, gw[kUpProj]);
  }
  dg.reset();
  du.reset();
  Activation dh = ops.alloc({R, H});
  ops.rmsnorm_backward_add(s.h, w[kPostNorm], s.rstd_post, db, dy, dh, gw[kPostNorm]);

  // h = x + o_proj(o).
  Activation d_o = ops.alloc({R, c.q_dim()}, act);
  ops.linear_backward(s.o, w[kOProj], dh, d_o, false, gw[kOProj]);
  // Attention, then RoPE and the per-head norms undone, then the projections: one GEMM each way for q, k
  // and v when forward fused them and their gradients lie back to back too ([dq | dk | dv]).
  const TensorRef qkv = stacked({w[kQProj], w[kKProj], w[kVProj]}), qkv_grad = stacked({gw[kQProj], gw[kKProj], gw[kVProj]});
  const bool qkv_fused = s.k.ref().empty() && !qkv.empty() && !qkv_grad.empty();
  const Qkv p = qkv_of(c, s);
  Activation dqr = ops.alloc({R, c.q_dim()}, act), dkr = ops.alloc({R, c.kv_dim()}, act), dqkv, dk, dv;
  Qkv d;  // dq, dk, dv
  if (qkv_fused) {
    dqkv = ops.alloc({R, c.q_dim() + 2 * c.kv_dim()}, act);
    d = qkv_columns(c, dqkv);
  } else {
    dqkv = ops.alloc({R, c.q_dim()}, act), dk = ops.alloc({R, c.kv_dim()}, act), dv = ops.alloc({R, c.kv_dim()}, act);
    d = {dqkv, dk, dv};
  }
  ops.attention_backward(s.qr, s.kr, p.v, s.o, d_o, s.lse, attention_shape(c), dqr, dkr, d.v);
  d_o.reset();
  ops.qk_norm_rope_backward(p.q, w[kQNorm], s.rstd_q, dqr, d.q, gw[kQNorm]);
  ops.qk_norm_rope_backward(p.k, w[kKNorm], s.rstd_k, dkr, d.k, gw[kKNorm]);
  dqr.reset();
  dkr.reset();
  Activation da = ops.alloc({R, H}, act);
  if (qkv_fused) {
    ops.linear_backward(s.a, qkv, dqkv, da, false, qkv_grad);
  } else {
    ops.linear_backward(s.a, w[kQProj], d.q, da, false, gw[kQProj]);
    ops.linear_backward(s.a, w[kKProj], d.k, da, true, gw[kKProj]);
    ops.linear_backward(s.a, w[kVProj], d.v, da, true, gw[kVProj]);
  }

  ops.rmsnorm_backward_add(x, w[kInputNorm], s.rstd_in, da, dh, dx, gw[kInputNorm]);
}

}  // namespace zero::model
