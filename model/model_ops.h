// ModelOps: the numerical work of the reward model, by backend (CPU: Eigen over host memory; CUDA:
// cuBLASLt and our kernels). decoder_layer.cpp and reward_model.cpp orchestrate these calls and never
// touch an element themselves, so one model runs on either backend.
//
// Activations are [rows, features] row-major (one token per row, the memory of torch's [tokens, features]),
// allocated by the backend (alloc) in its own memory; rows = token_rows(plan) (the CPU computes the real
// tokens only, a GPU may round up for its GEMM tiles: the extra rows are never attended to nor pooled).
// Weights are torch's row-major shapes ([out, in] for a linear layer), fp32 or bf16 (widened inside the
// backend); weight gradients are written once, overwriting, in the gradient view's dtype (bf16: fp32
// math, rounded once to nearest even). Normalisation statistics (rstd) and the attention log-sum-exp are
// fp32. The public calls are non-virtual so the shape contract is checked in one place; backends implement
// the do_* hooks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/math/pair_loss_math.h"
#include "core/step_clock.h"
#include "model/attention.h"
#include "model/param_access.h"
#include "model/tensor_ref.h"
#include "model/token_plan.h"

namespace zero::model {

class ModelOps;

// An activation tensor in a backend's memory, freed through that backend. Move-only.
class Activation {
 public:
  Activation() = default;
  ~Activation() { reset(); }
  Activation(Activation&& o) noexcept : owner_(o.owner_), ref_(o.ref_) { o.owner_ = nullptr, o.ref_ = {}; }
  Activation& operator=(Activation&& o) noexcept;
  Activation(const Activation&) = delete;
  Activation& operator=(const Activation&) = delete;

  void reset();
  const TensorRef& ref() const { return ref_; }
  operator const TensorRef&() const { return ref_; }  // NOLINT: activations are passed to ops as views

 private:
  friend class ModelOps;
  Activation(ModelOps* owner, const TensorRef& ref) : owner_(owner), ref_(ref) {}
  ModelOps* owner_ = nullptr;
  TensorRef ref_;
};

// What the pair loss needs besides the rewards (core/math/pair_loss_math.h: the formula).
struct PairLossInputs {
  std::span<const uint8_t> mask{}; // [P]: 1 = real pair, 0 = a masked filler pair
  std::span<const float> margin{}; // [P], or empty: no margins (0)
  double center = 0.0;             // reward-centering coefficient (0 = off)
  // Optional: each pair's group (pmtrain: its training set), 0 <= group[i] < groups; PairStats::groups then
  // holds each group's sums beside the total. Empty: no groups.
  std::span<const int32_t> group{};
  int32_t groups = 0;
};

// What the pair loss reports (pair metrics over real pairs only).
struct PairStats {
  double loss_sum = 0.0;             // sum over real pairs of the loss (softplus(r_r - r_c + margin) + centering)
  int64_t real_pairs = 0;
  int64_t correct_pairs = 0;         // real pairs with r_chosen > r_rejected (ties count as wrong)
  double chosen_reward_sum = 0.0;    // over real pairs
  double rejected_reward_sum = 0.0;  // over real pairs
  std::vector<PairStats> groups;     // PairLossInputs::group's: the sums of each group's real pairs (or empty)

  static PairStats of(const math::PairLossSums& s) {
    return {s.loss_sum, s.real_pairs, s.correct_pairs, s.chosen_sum, s.rejected_sum, {}};
  }
  // The total and each group's from the op's sums: [total, group 0, ..., group groups - 1].
  static PairStats of_groups(const math::PairLossSums* s, int32_t groups) {
    PairStats t = of(s[0]);
    for (int32_t g = 0; g < groups; ++g) t.groups.push_back(of(s[1 + g]));
    return t;
  }
  // The entries added in order (ModelOps::take_pair_stats' sum of its calls).
  static PairStats sum(const std::vector<PairStats>& each) {
    PairStats t;
    for (const PairStats& s : each) t.add(s);
    return t;
  }
  void add(const PairStats& o) {
    loss_sum += o.loss_sum;
    real_pairs += o.real_pairs;
    correct_pairs += o.correct_pairs;
    chosen_reward_sum += o.chosen_reward_sum;
    rejected_reward_sum += o.rejected_reward_sum;
    if (groups.size() < o.groups.size()) groups.resize(o.groups.size());
    for (size_t g = 0; g < o.groups.size(); ++g) groups[g].add(o.groups[g]);
  }
};

struct RopeSpec {
  int64_t head_dim = 0;
  double theta = 0.0;
};

class ModelOps {
 public:
  virtual ~ModelOps() = default;
  virtual const char* name() const = 0;

  // The dtype of the big activations this backend keeps (normed inputs, projections, q/k after RoPE,
  // attention output, MLP gate/up/product and their gradients): fp32 on the CPU; the CUDA backend's bf16
  // mode keeps them in bf16 as torch's autocast does. The residual stream and its gradient, rstd, lse and
  // rewards are fp32 on every backend; ops take each tensor in its own dtype (fp32 or bf16).
  virtual DType activation_dtype() const { return DType::F32; }

  // ---- memory ---------------------------------------------------------------------------------------
  // An uninitialised tensor of the given shape in this backend's memory (every op overwrites its outputs).
  Activation alloc(std::initializer_list<int64_t> shape, DType dtype = DType::F32);
  // The first dst.size() elements of src, as fp32, into host memory (rewards, parity traces).
  void to_host(const TensorRef& src, std::span<float> dst);
  // Bytes of the activations alloc handed out and not yet freed, and their peak (what
  // model/activation_plan.h predicts; the planner reads that, tests compare the two).
  size_t live_bytes() const { return live_bytes_; }
  size_t peak_bytes() const { return peak_bytes_; }
  void reset_peak_bytes() { peak_bytes_ = live_bytes_; }
  // Gives back what the backend caches of freed activations (CUDA: the pool's free blocks, after a wait for
  // the stream) so blocks of one kind of batch are not held beside another's: called when the shapes change
  // kind (training steps <-> evaluation batches), keeping the device within the memory plan. No-op on the CPU.
  void release_cached_memory() { do_release_cached_memory(); }

  // ---- timing ----------------------------------------------------------------------------------------
  // Each op below runs inside a scope of `clock` (null: untimed): linear_* as gemm, attention_* as
  // attention, the rest as elementwise; alloc, to_host and begin_batch are not ops and stay untimed. The
  // clock is the backend's (host time on the CPU, events on the compute stream on CUDA).
  void set_step_clock(StepClock* clock) { clock_ = clock; }
  StepClock* step_clock() const { return clock_; }

  // ---- the micro-batch -------------------------------------------------------------------------------
  // Makes the plan's token ids, positions, sequences and pooled tokens (and the RoPE angles of its
  // positions) current for the ops below until the next begin_batch. The plan must outlive the batch.
  void begin_batch(const TokenPlan& plan, const RopeSpec& rope);
  // Rows of every token activation of this plan on this backend (at least plan.num_tokens()).
  virtual int64_t token_rows(const TokenPlan& plan) const = 0;

  // ---- linear layers (torch's F.linear without bias), w [out, in] ------------------------------------
  void linear_forward(const TensorRef& x, const TensorRef& w, const TensorRef& y);  // y = x w^T
  // y = x w^T + residual (o_proj and down_proj into the fp32 residual stream; y may be residual): on CUDA
  // one GEMM whose epilogue adds the residual, elsewhere linear_forward then add.
  void linear_forward_add(const TensorRef& x, const TensorRef& w, const TensorRef& residual, const TensorRef& y);
  void linear_input_grad(const TensorRef& dy, const TensorRef& w, const TensorRef& dx, bool accumulate);  // dx (+)= dy w
  void linear_weight_grad(const TensorRef& x, const TensorRef& dy, const TensorRef& dw);  // dw = dy^T x
  // Both at once, input gradient first (a layer's backward of each projection): one op, so that a backend reads dy
  // into its GEMMs' input dtype once for the two (CUDA in bf16: o_proj's and down_proj's dy is the fp32 residual
  // stream's gradient, converted once where each GEMM converted it before).
  void linear_backward(const TensorRef& x, const TensorRef& w, const TensorRef& dy, const TensorRef& dx,
                       bool accumulate, const TensorRef& dw);

  // ---- RMSNorm over each row (HF Qwen3RMSNorm: y = w * (x * rsqrt(mean(x^2) + eps)), in fp32) ----------
  void rmsnorm_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y, const TensorRef& rstd);
  // dx overwritten; dw = the sum over rows.
  void rmsnorm_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                        const TensorRef& dx, const TensorRef& dw);
  // dx = the norm's input gradient + residual (the residual stream's gradient passing the norm by; dx is not
  // residual): on CUDA one kernel, elsewhere rmsnorm_backward then add. The same bits either way.
  void rmsnorm_backward_add(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                            const TensorRef& residual, const TensorRef& dx, const TensorRef& dw);

  // ---- q_norm / k_norm then RoPE at each token's position, on a projection [rows, heads * head_dim] ----
  // RMSNorm per head over head_dim (w [head_dim], rstd [rows * heads]), then the rotate_half rotation.
  // x and backward's dx may be column views (of the fused q/k/v projection and its gradient); y, dy packed.
  void qk_norm_rope_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                            const TensorRef& rstd);
  void qk_norm_rope_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                             const TensorRef& dx, const TensorRef& dw);

  // ---- causal GQA attention within each sequence of the batch ----------------------------------------
  // q, o [rows, heads * d]; k, v [rows, kv_heads * d]; lse [rows, heads] fp32 (log-sum-exp of each query's
  // scaled scores, what backward needs besides q, k, v, o). v and backward's dv may be column views (of the
  // fused q/k/v projection and its gradient); every other tensor is packed.
  void attention_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const AttentionShape& s,
                         const TensorRef& o, const TensorRef& lse);
  // dq, dk, dv overwritten.
  void attention_backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                          const TensorRef& d_o, const TensorRef& lse, const AttentionShape& s, const TensorRef& dq,
                          const TensorRef& dk, const TensorRef& dv);

  // ---- SwiGLU gate: m = silu(g) * u, element-wise -------------------------------------------------------
  // g, u, dg, du may be column views (TensorRef::columns: the halves of the fused gate/up GEMM's output
  // and its gradient); m and dm are packed.
  void swiglu_forward(const TensorRef& g, const TensorRef& u, const TensorRef& m);
  void swiglu_backward(const TensorRef& g, const TensorRef& u, const TensorRef& dm, const TensorRef& dg,
                       const TensorRef& du);

  // out = a + b (out may be a or b).
  void add(const TensorRef& a, const TensorRef& b, const TensorRef& out);

  // ---- embedding, table [vocab, hidden], reached as a Piece of its flat elements (the whole table is one
  // run [0, vocab * hidden)); x [rows, hidden] ---------------------------------------------------------
  // For each token, the part of its row inside the piece's runs: x[t] = table[token t] over all pieces.
  void embedding_forward(const Piece& table, int64_t vocab, const TensorRef& x);
  // Every run overwritten: zero, then the scatter-add of the tokens' rows of dx falling inside it, in
  // token order (deterministic; bf16 runs sum in fp32 and round once).
  void embedding_backward(const TensorRef& dx, int64_t vocab, const Piece& dtable);

  // ---- the score head at the pooled tokens --------------------------------------------------------------
  // rewards[s] = score . final_norm(x[pooled s]); score [1, hidden], rewards [num_seqs] fp32.
  void pooled_head_forward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                           const TensorRef& rewards);
  // dx overwritten (zero except at the pooled rows); d_norm_w, d_score overwritten.
  void pooled_head_backward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                            const TensorRef& drewards, const TensorRef& dx, const TensorRef& d_norm_w,
                            const TensorRef& d_score);

  // ---- the pairwise loss: softplus(r_rejected - r_chosen + margin) (+ centering) summed over real pairs ----
  // rewards [2P] (sequence 2i chosen, 2i + 1 rejected); drewards (empty or [2P]): d loss_sum / d reward.
  // The metrics are not returned: they are kept by the backend (on the device on CUDA) so that queuing a
  // micro-batch's loss and backward never waits for the device; take_pair_stats() reads them.
  void pair_loss(const TensorRef& rewards, const PairLossInputs& in, const TensorRef& drewards);
  // The metrics of every pair_loss since the last take, summed in call order (each call's sums as the
  // CPU computes them, then added up in double); one host wait on a GPU backend.
  PairStats take_pair_stats();
  // The same metrics one entry per pair_loss call, in call order: for sums that must not depend on how
  // calls were grouped (zero.world_invariant adds each micro-batch's in the step's order).
  std::vector<PairStats> take_pair_stats_each();
  // pair_loss calls whose metrics were not taken yet.
  int64_t pending_pair_losses() const { return pending_pair_losses_; }

 protected:
  const TokenPlan& plan() const;  // the current batch's

  virtual void* do_alloc(size_t bytes) = 0;
  virtual void do_free(void* p) = 0;
  virtual void do_release_cached_memory() {}
  virtual void do_to_host(const TensorRef& src, std::span<float> dst) = 0;
  virtual void do_begin_batch(const TokenPlan& plan, const RopeSpec& rope) = 0;
  virtual void do_linear_forward(const TensorRef& x, const TensorRef& w, const TensorRef& y) = 0;
  // Default: do_linear_forward into y, then do_add (the add timed as element-wise work).
  virtual void do_linear_forward_add(const TensorRef& x, const TensorRef& w, const TensorRef& residual,
                                     const TensorRef& y);
  virtual void do_linear_input_grad(const TensorRef& dy, const TensorRef& w, const TensorRef& dx, bool accumulate) = 0;
  virtual void do_linear_weight_grad(const TensorRef& x, const TensorRef& dy, const TensorRef& dw) = 0;
  // Default: do_linear_input_grad, then do_linear_weight_grad.
  virtual void do_linear_backward(const TensorRef& x, const TensorRef& w, const TensorRef& dy, const TensorRef& dx,
                                  bool accumulate, const TensorRef& dw);
  virtual void do_rmsnorm_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                                  const TensorRef& rstd) = 0;
  virtual void do_rmsnorm_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                                   const TensorRef& dx, const TensorRef& dw) = 0;
  // Default: do_rmsnorm_backward into dx, then do_add (the add timed as element-wise work of its own).
  virtual void do_rmsnorm_backward_add(const TensorRef& x, const TensorRef& w, const TensorRef& rstd,
                                       const TensorRef& dy, const TensorRef& residual, const TensorRef& dx,
                                       const TensorRef& dw);
  virtual void do_qk_norm_rope_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                                       const TensorRef& rstd) = 0;
  virtual void do_qk_norm_rope_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd,
                                        const TensorRef& dy, const TensorRef& dx, const TensorRef& dw) = 0;
  virtual void do_attention_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                    const AttentionShape& s, const TensorRef& o, const TensorRef& lse) = 0;
  virtual void do_attention_backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                                     const TensorRef& d_o, const TensorRef& lse, const AttentionShape& s,
                                     const TensorRef& dq, const TensorRef& dk, const TensorRef& dv) = 0;
  virtual void do_swiglu_forward(const TensorRef& g, const TensorRef& u, const TensorRef& m) = 0;
  virtual void do_swiglu_backward(const TensorRef& g, const TensorRef& u, const TensorRef& dm, const TensorRef& dg,
                                  const TensorRef& du) = 0;
  virtual void do_add(const TensorRef& a, const TensorRef& b, const TensorRef& out) = 0;
  virtual void do_embedding_forward(const Piece& table, const TensorRef& x) = 0;
  virtual void do_embedding_backward(const TensorRef& dx, const Piece& dtable) = 0;
  virtual void do_pooled_head_forward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                                      const TensorRef& rewards) = 0;
  virtual void do_pooled_head_backward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                                       const TensorRef& drewards, const TensorRef& dx, const TensorRef& d_norm_w,
                                       const TensorRef& d_score) = 0;
  virtual void do_pair_loss(const TensorRef& rewards, const PairLossInputs& in, const TensorRef& drewards) = 0;
  virtual std::vector<PairStats> do_take_pair_stats() = 0;  // one per pair_loss call since the last take

 private:
  friend class Activation;
  // Checks that t is a token activation of the current batch with `features` elements per row, packed
  // unless view_ok (a column view of a wider row: the fused projections' outputs and gradients).
  void check_tokens(const TensorRef& t, int64_t features, const char* what, bool view_ok = false) const;
  // w [out, in] (a weight or its gradient) against token tensors `outs` [rows, out] and `ins` [rows, in]; the
  // messages name `op` and the tensors (literals: nothing formatted unless a check fails).
  void check_linear(const TensorRef& w, const TensorRef& outs, const TensorRef& ins, const char* op,
                    const char* outs_name, const char* ins_name) const;

  const TokenPlan* plan_ = nullptr;
  size_t live_bytes_ = 0, peak_bytes_ = 0;
  int64_t pending_pair_losses_ = 0;
  StepClock* clock_ = nullptr;
};

}  // namespace zero::model
