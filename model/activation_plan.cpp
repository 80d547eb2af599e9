// The allocation order of reward_model.cpp's run() (backward on) and decoder_layer.cpp, replayed on a
// byte counter. Keep it in step with them: model tests compare it with ModelOps' peak exactly.
#include "model/activation_plan.h"

#include <algorithm>
#include <initializer_list>

namespace zero::model {

namespace {

// Live bytes and their peak, as ModelOps counts them.
struct Live {
  size_t cur = 0, peak = 0;
  void alloc(size_t b) { peak = std::max(peak, cur += b); }
  void free(size_t b) { cur -= b; }
};

// LayerActivations' fields in decoder_layer_forward's order, in bytes.
std::vector<size_t> layer_fields(const Qwen3Config& c, int64_t R, const ActivationDTypes& dt) {
  const size_t e = dtype_size(dt.activations), r = dtype_size(dt.residual), s = dtype_size(dt.stats);
  const size_t H = size_t(c.hidden_size), I = size_t(c.intermediate_size), Q = size_t(c.q_dim()),
               K = size_t(c.kv_dim()), nh = size_t(c.num_heads), nkv = size_t(c.num_kv_heads), n = size_t(R);
  return {n * H * e,   n * s,       // a, rstd_in
          n * Q * e,   n * K * e,   n * K * e,  // q, k, v
          n * Q * e,   n * K * e,   n * nh * s,  n * nkv * s,  // qr, kr, rstd_q, rstd_k
          n * Q * e,   n * nh * s,  // o, lse
          n * H * r,                // h (residual)
          n * H * e,   n * s,       // b, rstd_post
          n * I * e,   n * I * e,   n * I * e};  // g, u, m
}

// decoder_layer_forward into a LayerActivations that may already hold a layer (checkpointing's scratch):
// each field is allocated before its old tensor is freed.
void layer_forward(Live& m, const std::vector<size_t>& fields, bool slot_full) {
  for (size_t f : fields) {
    m.alloc(f);
    if (slot_full) m.free(f);
  }
}

// decoder_layer_backward's temporaries (dh is the residual's gradient).
void layer_backward(Live& m, const Qwen3Config& c, int64_t R, const ActivationDTypes& dt) {
  const size_t e = dtype_size(dt.activations), r = dtype_size(dt.residual), n = size_t(R);
  const size_t H = n * size_t(c.hidden_size) * e, I = n * size_t(c.intermediate_size) * e,
               Q = n * size_t(c.q_dim()) * e, K = n * size_t(c.kv_dim()) * e,
               dh = n * size_t(c.hidden_size) * r;
  const size_t start = m.cur;
  m.alloc(I), m.alloc(I), m.alloc(I);  // dm, dg, du
  m.free(I);                           // dm
  m.alloc(H);                          // db
  m.free(I), m.free(I);                // dg, du
  m.alloc(dh);                         // dh
  m.alloc(Q);                          // d_o
  m.alloc(Q), m.alloc(K), m.alloc(K);  // dqr, dkr, dv
  m.free(Q);                           // d_o
  m.alloc(Q), m.alloc(K);              // dq, dk
  m.alloc(H);                          // da
  m.cur = start;                       // all freed at scope exit
}

}  // namespace

ActivationPlan plan_activations(const Qwen3Config& c, int64_t R, int64_t seqs, bool ckpt, const ActivationDTypes& dt) {
  const int64_t L = c.num_layers;
  const size_t x = size_t(R) * size_t(c.hidden_size) * dtype_size(dt.residual);
  const std::vector<size_t> fields = layer_fields(c, R, dt);
  size_t kept = 0;
  for (size_t f : fields) kept += f;

  ActivationPlan p;
  p.per_layer_kept = kept;
  {
    Live t;
    layer_backward(t, c, R, dt);
    p.backward_transient = t.peak;
  }

  Live m;
  // Forward: x; per layer y, the layer's activations (kept, or checkpointing's one scratch slot);
  // the input is kept for backward, y becomes x.
  m.alloc(x);
  for (int64_t l = 0; l < L; ++l) {
    m.alloc(x);                                // y
    layer_forward(m, fields, ckpt && l > 0);   // scratch holds the previous layer from l = 1 on
  }
  if (ckpt && L > 0) m.free(kept);             // scratch reset before the head
  const size_t rewards = size_t(seqs) * 4;
  m.alloc(rewards), m.alloc(rewards);          // rewards, drewards (fp32)

  // Backward: dx; per layer (recompute into scratch, its y freed at once), dprev, the layer's
  // temporaries, then the old dx, the layer's input and (without checkpointing) its activations go.
  m.alloc(x);  // dx
  for (int64_t l = L - 1; l >= 0; --l) {
    if (ckpt) {
      m.alloc(x);                                // y of the recompute
      layer_forward(m, fields, l < L - 1);       // scratch is empty for the first recompute
      m.free(x);
    }
    m.alloc(x);  // dprev
    layer_backward(m, c, R, dt);
    m.free(x);   // the old dx
    if (!ckpt) m.free(kept);
    m.free(x);   // inputs[l]
  }
  p.peak = m.peak;
  return p;
}

size_t cpu_op_scratch_bytes(const Qwen3Config& c, int64_t max_seq_len, bool bf16_weights) {
  const size_t L = size_t(max_seq_len);
  const size_t scores = 2 * L * L * 4;  // backward: probabilities and their gradient, one sequence and head
  const size_t widest = size_t(std::max(c.intermediate_size, std::max(c.q_dim(), c.hidden_size))) *
                        size_t(c.hidden_size);
  const size_t widened = bf16_weights ? 2 * widest * 4 : 0;  // a weight widened + a weight gradient in fp32
  return std::max(scores, widened);
}

}  // namespace zero::model
