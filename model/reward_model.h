// The Qwen3 reward model: Qwen3 decoder + scalar score head pooled at each sequence's explicit
// last-real-token index (batch.last_index), trained with the pairwise loss. Parameters are reached only
// through ParamAccess, group by group (param_layout.h), so the engine decides where they live; the
// numbers are computed by a ModelOps backend (CPU by default), so the same orchestration runs on either.
// Computes only real tokens: each sequence attends within itself, in padded and packed batches alike.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/batch.h"
#include "model/activation_checkpointing.h"
#include "model/model_ops.h"
#include "model/param_access.h"
#include "model/param_layout.h"
#include "model/qwen3_config.h"
#include "model/token_plan.h"

namespace zero::model {

struct RewardModelOptions {
  // What each layer keeps for backward (activation_checkpointing.h); Full recomputes the layer in backward
  // (acquiring its group once more, as the contract says). Same numbers in every mode, bit for bit.
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::None;
  int64_t selective_layers = 0;  // under Full: the last this many layers are Selective (layer_checkpointing)
  // Under Full: drop each fully checkpointed layer's attention output and log-sum-exp too and run its
  // attention forward again in backward (the least memory); by default they are kept.
  bool recompute_attention = false;
  DecayPolicy decay;  // weight-decay flags written into the group specs
  AttentionKind attention = AttentionKind::Auto;  // for the default (CPU) ops
  int threads = 1;                                // for the default (CPU) ops: their math threads
  double center_rewards = 0.0;  // reward-centering coefficient of the pair loss (core/math/pair_loss_math.h)
};

// One micro-batch's results. Pair metrics cover real pairs only; rewards cover every sequence.
struct RewardOutput {
  std::vector<float> rewards;  // [num_seqs]: sequence 2i = chosen, 2i+1 = rejected of pair i
  PairStats pairs;             // loss sum, real and correct pairs, reward sums (model_ops.h)
  int64_t real_tokens = 0;     // tokens computed (pads are not)
};

// Activations captured by forward() for parity tests, copied to the host, over the real tokens in
// TokenPlan order (token t's features at [t * hidden, (t + 1) * hidden)).
struct ForwardTrace {
  std::vector<int32_t> cu_seqlens;            // sequence s occupies tokens [cu_seqlens[s], cu_seqlens[s + 1])
  std::vector<std::vector<float>> layer_out;  // [num_layers] x [N, H]: residual stream after each decoder layer
  std::vector<float> final_norm;              // [N, H]: model.norm over every real token (HF last_hidden_state)
};

class Qwen3RewardModel {
 public:
  // ops: the backend that computes (null: the CPU backend). Not thread-safe: one micro-batch at a time.
  explicit Qwen3RewardModel(Qwen3Config config, RewardModelOptions options = {}, std::unique_ptr<ModelOps> ops = {});

  const Qwen3Config& config() const { return config_; }
  const RewardModelOptions& options() const { return options_; }
  const std::vector<GroupSpec>& groups() const { return groups_; }  // the engine allocates from these
  int num_groups() const { return static_cast<int>(groups_.size()); }
  void set_activation_checkpointing(ActivationCheckpointing mode) { options_.activation_checkpointing = mode; }
  ModelOps& ops() const { return *ops_; }  // the backend (its step clock, its byte counts)

  // Forward, loss and backward of one micro-batch; each group's gradient buffers receive the gradient of
  // loss_sum (the SUM over real pairs: the step divides by the global pair count), with the batch's
  // margins (batch.pair_margin) and the options' centering. Returns once its
  // results are on the host (one wait for the device, after the backward is queued).
  RewardOutput forward_backward(const data::PairBatch& batch, ParamAccess& params) const;
  // Training's form: the same work, queued without waiting for the device; nothing is read back (the pair
  // metrics stay with the ops until ops().take_pair_stats(), once a step). Returns the real tokens computed.
  int64_t queue_forward_backward(const data::PairBatch& batch, ParamAccess& params) const;

  // Forward only (eval, scoring): acquire/release per group, no begin_backward, nothing kept.
  RewardOutput forward(const data::PairBatch& batch, ParamAccess& params, ForwardTrace* trace = nullptr) const;
  // Evaluation's form: forward only, queued like queue_forward_backward (metrics to take_pair_stats()).
  int64_t queue_forward(const data::PairBatch& batch, ParamAccess& params) const;

 private:
  // Queues the micro-batch's work; with `out`, then reads its rewards and metrics back into it.
  int64_t run(const data::PairBatch& batch, ParamAccess& params, bool backward, ForwardTrace* trace,
              RewardOutput* out) const;

  Qwen3Config config_;
  RewardModelOptions options_;
  std::vector<GroupSpec> groups_;
  std::unique_ptr<ModelOps> ops_;
};

}  // namespace zero::model
