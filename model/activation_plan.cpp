// The allocation order of reward_model.cpp's run() (with and without backward) and decoder_layer.cpp, replayed on a
// byte counter. Keep it in step with them: model tests compare it with ModelOps' peak exactly.
#include "model/activation_plan.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "model/device_scratch.h"
#include "model/token_plan.h"

namespace zero::model {

namespace {

// Live bytes and their peak, as ModelOps counts them.
struct Live {
  size_t cur = 0, peak = 0;
  void alloc(size_t b) { peak = std::max(peak, cur += b); }
  void free(size_t b) { cur -= b; }
};

// One layer's tensors (LayerActivations' fields), in bytes.
struct LayerTensors {
  size_t rstd_in, a, q, k, v, rstd_q, rstd_k, qr, kr, o, lse, h, rstd_post, b, g, u, m;
  size_t all() const { return rstd_in + a + q + k + v + rstd_q + rstd_k + qr + kr + o + lse + h + rstd_post + b + g + u + m; }
  size_t elementwise() const { return a + qr + kr + b + m; }  // what selective recompute drops and rebuilds
};

LayerTensors layer_tensors(const Qwen3Config& c, int64_t R, const ActivationDTypes& dt) {
  const size_t e = dtype_size(dt.activations), r = dtype_size(dt.residual), s = dtype_size(dt.stats);
  const size_t H = size_t(c.hidden_size), I = size_t(c.intermediate_size), Q = size_t(c.q_dim()),
               K = size_t(c.kv_dim()), nh = size_t(c.num_heads), nkv = size_t(c.num_kv_heads), n = size_t(R);
  LayerTensors t{};
  t.rstd_in = t.rstd_post = n * s;
  t.a = t.b = n * H * e;
  t.q = t.qr = t.o = n * Q * e;
  t.k = t.v = t.kr = n * K * e;
  t.rstd_q = t.lse = n * nh * s;
  t.rstd_k = n * nkv * s;
  t.h = n * H * r;  // residual
  t.g = t.u = t.m = n * I * e;
  return t;
}

// decoder_layer_forward's allocations in its order; `drop` marks where LayerKeep::WithoutElementwise
// frees a tensor again. q, k, v are one [q | k | v] allocation and g, u one [gate | up] (the fused
// projections: their weights back to back on the engine's views), which matters where a layer's tensors
// replace the last layer's one by one (a forward alone, full checkpointing's scratch).
struct Event {
  size_t bytes;
  bool drop = false;
  bool attention = false;  // o or lse: attention's outputs, which full checkpointing keeps apart
};
std::vector<Event> forward_events(const LayerTensors& t) {
  return {{t.rstd_in}, {t.a},          {t.q + t.k + t.v},   {t.a, true},    {t.rstd_q},   {t.rstd_k}, {t.qr},
          {t.kr},      {t.o, false, true}, {t.lse, false, true}, {t.qr, true}, {t.kr, true}, {t.h},      {t.rstd_post},
          {t.b},       {t.g + t.u},    {t.b, true},         {t.m},          {t.m, true}};
}

// What a fully checkpointed layer's forward does with attention's outputs (reward_model.cpp): computes them
// into the scratch slot like the rest (Scratch: recompute_attention), computes them and moves them out of the
// slot to be kept (Keep: the first forward), or finds them already there (Given: the recompute).
enum class AttentionOut { Scratch, Keep, Given };

// decoder_layer_forward into a LayerActivations that may already hold a layer (full checkpointing's
// scratch): each field is allocated before its old tensor is freed.
void layer_forward(Live& m, const std::vector<Event>& events, bool drop_elementwise, bool slot_full,
                   AttentionOut attention = AttentionOut::Scratch) {
  for (const Event& e : events) {
    if (e.drop) {
      if (drop_elementwise) m.free(e.bytes);
      continue;
    }
    if (e.attention && attention == AttentionOut::Given) continue;
    m.alloc(e.bytes);
    if (slot_full && !(e.attention && attention == AttentionOut::Keep)) m.free(e.bytes);
  }
}

// decoder_layer_rematerialise: a, qr, kr, b, m in its order.
void layer_rematerialise(Live& m, const LayerTensors& t) {
  for (size_t b : {t.a, t.qr, t.kr, t.b, t.m}) m.alloc(b);
}

// decoder_layer_backward's temporaries (dh is the residual's gradient).
void layer_backward(Live& m, const Qwen3Config& c, int64_t R, const ActivationDTypes& dt) {
  const size_t e = dtype_size(dt.activations), r = dtype_size(dt.residual), n = size_t(R);
  const size_t H = n * size_t(c.hidden_size) * e, I = n * size_t(c.intermediate_size) * e,
               Q = n * size_t(c.q_dim()) * e, K = n * size_t(c.kv_dim()) * e,
               dh = n * size_t(c.hidden_size) * r;
  const size_t start = m.cur;
  // The fused projections' order (their weights and gradients back to back, as on the engine's views):
  // one [dg | du] and one [dq | dk | dv] buffer.
  m.alloc(I), m.alloc(2 * I);          // dm, [dg | du]
  m.free(I);                           // dm
  m.alloc(H);                          // db
  m.free(2 * I);                       // [dg | du]
  m.alloc(dh);                         // dh
  m.alloc(Q);                          // d_o
  m.alloc(Q), m.alloc(K);              // dqr, dkr
  m.alloc(Q + 2 * K);                  // [dq | dk | dv]
  m.free(Q);                           // d_o
  m.free(Q), m.free(K);                // dqr, dkr
  m.alloc(H);                          // da
  m.cur = start;                       // all freed at scope exit
}

}  // namespace

ActivationPlan plan_activations(const Qwen3Config& c, int64_t R, int64_t seqs, ActivationCheckpointing mode,
                                const ActivationDTypes& dt, int64_t selective_layers, bool recompute_attention) {
  const int64_t L = c.num_layers;
  const bool full = mode == ActivationCheckpointing::Full, selective = mode == ActivationCheckpointing::Selective;
  auto mode_of = [&](int64_t l) { return layer_checkpointing(mode, selective_layers, l, L); };
  const size_t x = size_t(R) * size_t(c.hidden_size) * dtype_size(dt.residual);
  const LayerTensors t = layer_tensors(c, R, dt);
  const std::vector<Event> events = forward_events(t);

  const size_t attention_kept = recompute_attention ? 0 : t.o + t.lse;  // what a full layer keeps besides its input
  const AttentionOut first = recompute_attention ? AttentionOut::Scratch : AttentionOut::Keep,
                     again = recompute_attention ? AttentionOut::Scratch : AttentionOut::Given;

  ActivationPlan p;
  p.per_layer_forward = t.all();
  p.per_layer_kept = full ? attention_kept : selective ? t.all() - t.elementwise() : t.all();
  p.per_layer_recomputed = full ? t.all() - attention_kept : selective ? t.elementwise() : 0;
  {
    Live tr;
    layer_backward(tr, c, R, dt);
    p.backward_transient = tr.peak;
  }

  Live m;
  // Forward: x; per layer y, the layer's activations (kept, selective's kept part, or full checkpointing's
  // one scratch slot); the input is kept for backward, y becomes x.
  m.alloc(x);
  bool scratch = false;  // full checkpointing's slot holds a layer
  for (int64_t l = 0; l < L; ++l) {
    const ActivationCheckpointing ml = mode_of(l);
    if (ml != ActivationCheckpointing::Full && scratch) m.free(t.all() - attention_kept), scratch = false;  // past the full layers
    m.alloc(x);  // y
    if (ml == ActivationCheckpointing::Full) {
      layer_forward(m, events, false, scratch, first);
      scratch = true;
    } else {
      layer_forward(m, events, ml == ActivationCheckpointing::Selective, false);
      p.recomputed += ml == ActivationCheckpointing::Selective ? t.elementwise() : 0;
    }
  }
  if (scratch) m.free(t.all() - attention_kept);  // scratch reset before the head (the kept o, lse moved out)
  const size_t rewards = size_t(seqs) * 4;
  m.alloc(rewards), m.alloc(rewards);  // rewards, drewards (fp32)

  // Backward: dx; per layer (full: recompute into scratch, its y freed at once; selective: rebuild the
  // element-wise tensors), dprev, the layer's temporaries, then the old dx, the layer's input and (unless
  // full) its activations go.
  m.alloc(x);  // dx
  scratch = false;
  for (int64_t l = L - 1; l >= 0; --l) {
    const ActivationCheckpointing ml = mode_of(l);
    if (ml == ActivationCheckpointing::Full) {
      if (scratch && !recompute_attention) m.free(t.o + t.lse);  // the layer's kept o, lse replace the slot's
      m.alloc(x);                                       // y of the recompute
      layer_forward(m, events, false, scratch, again);  // scratch is empty for the first recompute
      scratch = true;
      m.free(x);
      p.recomputed += t.all() - attention_kept;
      ++p.full_layers;
      p.attention_recomputed_layers += recompute_attention ? 1 : 0;
    }
    if (ml == ActivationCheckpointing::Selective) layer_rematerialise(m, t);
    m.alloc(x);  // dprev
    layer_backward(m, c, R, dt);
    m.free(x);   // the old dx
    if (ml != ActivationCheckpointing::Full) m.free(t.all());
    m.free(x);   // inputs[l]
  }
  p.peak = m.peak;
  return p;
}

size_t plan_forward_activations(const Qwen3Config& c, int64_t R, int64_t seqs, const ActivationDTypes& dt) {
  const size_t x = size_t(R) * size_t(c.hidden_size) * dtype_size(dt.residual);
  const LayerTensors t = layer_tensors(c, R, dt);
  const std::vector<Event> events = forward_events(t);
  Live m;
  m.alloc(x);  // the residual stream
  for (int64_t l = 0; l < c.num_layers; ++l) {
    m.alloc(x);                               // y
    layer_forward(m, events, false, l > 0);   // into the one scratch slot, which holds a layer after the first
    m.free(x);                                // the old x, once y takes its place
  }
  if (c.num_layers > 0) m.free(t.all());  // scratch reset before the head
  m.alloc(size_t(seqs) * 4);    // rewards (fp32)
  return m.peak;
}

size_t cpu_op_scratch_bytes(const Qwen3Config& c, int64_t max_seq_len, bool bf16_weights) {
  const size_t L = size_t(max_seq_len);
  const size_t scores = 2 * L * L * 4;  // backward: probabilities and their gradient, one sequence and head
  // gate_proj and up_proj widen as one [2I, H] weight, q/k/v_proj as one [q + 2 kv, H], when they are fused
  // (decoder_layer.cpp).
  const size_t widest = size_t(std::max({2 * c.intermediate_size, c.q_dim() + 2 * c.kv_dim(), c.hidden_size})) *
                        size_t(c.hidden_size);
  const size_t widened = bf16_weights ? 2 * widest * 4 : 0;  // a weight widened + a weight gradient in fp32
  return std::max(scores, widened);
}

size_t gpu_op_scratch_bytes(const Qwen3Config& c, int64_t tokens, int64_t seqs, DType activations) {
  namespace ds = device_scratch;
  const int64_t H = c.hidden_size, d = c.head_dim;
  // An operand not in the GEMMs' input dtype is converted: with bf16 inputs, the fp32 residual stream's gradient
  // (dy, dh: [rows, hidden]), once for both GEMMs of o_proj's and of down_proj's linear_backward.
  const size_t gemm_operand =
      activations == DType::F32 ? 0 : dtype_size(activations) * size_t(padded_token_rows(tokens)) * size_t(H);
  return std::max({ds::norm_partials_bytes(tokens, H), ds::norm_partials_bytes(tokens * c.num_heads, d),
                   ds::norm_partials_bytes(tokens * c.num_kv_heads, d), ds::attention_workspace_bytes(tokens, c.num_heads),
                   ds::pooled_head_partials_bytes(seqs, H), gemm_operand});
}

}  // namespace zero::model
