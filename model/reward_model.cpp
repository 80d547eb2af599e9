// Qwen3RewardModel: the group-by-group forward and backward through ParamAccess, as ModelOps calls.
#include "model/reward_model.h"

#include <algorithm>

#include "core/check.h"
#include "model/cpu/cpu_model_ops.h"
#include "model/decoder_layer.h"

namespace zero::model {

namespace {

// A group's views, checked against its GroupSpec (count and shapes; the ops check dtypes).
std::vector<TensorRef> checked(std::vector<TensorRef> views, const GroupSpec& spec, int g, const char* what) {
  ZERO_CHECK(views.size() == spec.tensors.size(), "group {}: ParamAccess gave {} {}, the model expects {}", g,
             views.size(), what, spec.tensors.size());
  for (size_t t = 0; t < views.size(); ++t) {
    const TensorRef& v = views[t];
    const std::vector<int64_t>& shape = spec.tensors[t].shape;
    ZERO_CHECK(v.rank == int(shape.size()) && std::equal(shape.begin(), shape.end(), v.dims.begin()),
               "group {}: {} {} is not shaped as {}", g, what, t, spec.tensors[t].name);
  }
  return views;
}
std::vector<TensorRef> acquire_views(ParamAccess& p, const GroupSpec& spec, int g) {
  return checked(p.acquire(g), spec, g, "tensors");
}
std::vector<TensorRef> grad_views(ParamAccess& p, const GroupSpec& spec, int g) {
  return checked(p.grad_buffers(g), spec, g, "gradient buffers");
}

// A whole tensor as a piece: one run over all of its elements.
Piece whole(const TensorRef& t) { return {t.dtype, {{0, t.numel(), t.data}}}; }

}  // namespace

Qwen3RewardModel::Qwen3RewardModel(Qwen3Config config, RewardModelOptions options, std::unique_ptr<ModelOps> ops)
    : config_(std::move(config)),
      options_(options),
      groups_(qwen3_rm_groups(config_, options_.decay)),
      ops_(ops ? std::move(ops) : make_cpu_model_ops(options_.attention, options_.threads)) {}

RewardOutput Qwen3RewardModel::forward_backward(const data::PairBatch& batch, ParamAccess& params) const {
  RewardOutput out;
  run(batch, params, true, nullptr, &out);
  return out;
}

int64_t Qwen3RewardModel::queue_forward_backward(const data::PairBatch& batch, ParamAccess& params) const {
  return run(batch, params, true, nullptr, nullptr);
}

RewardOutput Qwen3RewardModel::forward(const data::PairBatch& batch, ParamAccess& params, ForwardTrace* trace) const {
  RewardOutput out;
  run(batch, params, false, trace, &out);
  return out;
}

int64_t Qwen3RewardModel::queue_forward(const data::PairBatch& batch, ParamAccess& params) const {
  return run(batch, params, false, nullptr, nullptr);
}

int64_t Qwen3RewardModel::run(const data::PairBatch& batch, ParamAccess& params, bool backward, ForwardTrace* trace,
                              RewardOutput* out) const {
  const Qwen3Config& c = config_;
  const int64_t H = c.hidden_size, L = c.num_layers;
  const int head = head_group(c);
  // Each layer's checkpointing (all alike unless model.selective_layers mixes full and selective).
  auto mode_of = [&](int64_t l) {
    return layer_checkpointing(options_.activation_checkpointing, options_.selective_layers, l, L);
  };
  const float eps = float(c.rms_norm_eps);
  ModelOps& ops = *ops_;
  ZERO_CHECK(!out || ops.pending_pair_losses() == 0,
             "a micro-batch's results asked for while {} queued micro-batches' metrics were not taken "
             "(take_pair_stats)", ops.pending_pair_losses());

  const TokenPlan plan = make_token_plan(batch, c.vocab_size);
  ops.begin_batch(plan, {c.head_dim, c.rope_theta});
  const int64_t N = plan.num_tokens(), R = ops.token_rows(plan), S = plan.num_seqs();
  auto to_host = [&](const TensorRef& t) {
    std::vector<float> v(size_t(N * H));
    ops.to_host(t, v);
    return v;
  };
  if (trace) {
    trace->cu_seqlens = plan.cu_seqlens;
    trace->layer_out.clear();
  }

  // ---- forward -------------------------------------------------------------------------------------
  Activation x = ops.alloc({R, H});  // residual stream
  if (params.num_pieces(0) == 1) {
    const auto w = acquire_views(params, groups_[0], 0);
    ops.embedding_forward(whole(w[0]), c.vocab_size, x);
    params.release(0);
  } else {
    for (int k = 0; k < params.num_pieces(0); ++k) {
      ops.embedding_forward(params.acquire_piece(0, k), c.vocab_size, x);
      params.release_piece(0, k);
    }
  }
  std::vector<Activation> inputs(backward ? L : 0);  // each layer's input, kept for backward
  // The layers not fully checkpointed; of a fully checkpointed one, its attention output and log-sum-exp
  // unless options_.recompute_attention (moved out of the scratch after its forward, back in for its recompute).
  std::vector<LayerActivations> saved(backward ? L : 0);
  LayerActivations scratch;  // forward-only and fully checkpointed layers
  const bool keep_attention = !options_.recompute_attention;
  for (int64_t l = 0; l < L; ++l) {
    const int g = layer_group(int(l));
    const auto w = acquire_views(params, groups_[g], g);
    const ActivationCheckpointing mode = mode_of(l);
    // The fully checkpointed layers come first: the scratch they shared is not needed past them.
    if (backward && mode != ActivationCheckpointing::Full) scratch = LayerActivations();
    Activation y = ops.alloc({R, H});
    const LayerKeep keep = backward && mode == ActivationCheckpointing::Selective ? LayerKeep::WithoutElementwise
                                                                                   : LayerKeep::All;
    decoder_layer_forward(ops, c, w, x, y, backward && mode != ActivationCheckpointing::Full ? saved[l] : scratch,
                          keep);
    if (backward && mode == ActivationCheckpointing::Full && keep_attention)
      saved[l].o = std::move(scratch.o), saved[l].lse = std::move(scratch.lse);
    params.release(g);
    if (backward) inputs[l] = std::move(x);
    x = std::move(y);
    if (trace) trace->layer_out.push_back(to_host(x));
  }
  scratch = LayerActivations();  // free the last forward-only layer's activations before the head

  Activation rewards = ops.alloc({S});
  {
    const auto w = acquire_views(params, groups_[head], head);
    ops.pooled_head_forward(x, w[kFinalNorm], w[kScore], eps, rewards);
    if (trace) {
      Activation xn = ops.alloc({R, H}), rstd = ops.alloc({R});
      ops.rmsnorm_forward(x, w[kFinalNorm], eps, xn, rstd);
      trace->final_norm = to_host(xn);
    }
    params.release(head);
  }
  Activation drewards = backward ? ops.alloc({S}) : Activation();
  ops.pair_loss(rewards, {batch.pair_mask, batch.pair_margin, options_.center_rewards, batch.pair_group, batch.groups},
                drewards);
  if (backward) {  // ---- backward ----------------------------------------------------------------------
    params.begin_backward();
    Activation dx = ops.alloc({R, H});  // d loss / d residual stream
    {
      const auto w = acquire_views(params, groups_[head], head);
      const auto gw = grad_views(params, groups_[head], head);
      ops.pooled_head_backward(x, w[kFinalNorm], w[kScore], eps, drewards, dx, gw[kFinalNorm], gw[kScore]);
      params.grad_ready(head);
      params.release(head);
    }
    for (int64_t l = L - 1; l >= 0; --l) {
      const int g = layer_group(int(l));
      const auto w = acquire_views(params, groups_[g], g);
      // Recompute what forward did not keep: same inputs, same ops, so the same activations bit for bit.
      const ActivationCheckpointing mode = mode_of(l);
      const bool full = mode == ActivationCheckpointing::Full;
      const LayerActivations* acts = &scratch;
      if (full) {
        if (keep_attention) scratch.o = std::move(saved[l].o), scratch.lse = std::move(saved[l].lse);
        Activation y = ops.alloc({R, H});
        decoder_layer_forward(ops, c, w, inputs[l], y, scratch, LayerKeep::All,
                              keep_attention ? LayerAttention::Given : LayerAttention::Compute);
      } else {
        if (mode == ActivationCheckpointing::Selective) decoder_layer_rematerialise(ops, c, w, inputs[l], saved[l]);
        acts = &saved[l];
      }
      const auto gw = grad_views(params, groups_[g], g);
      Activation dprev = ops.alloc({R, H});
      decoder_layer_backward(ops, c, w, gw, inputs[l], *acts, dx, dprev);
      dx = std::move(dprev);
      params.grad_ready(g);
      params.release(g);
      if (!full) saved[l] = LayerActivations();  // done with this layer's activations
      inputs[l] = Activation();
    }
    if (params.num_pieces(0) == 1) {
      acquire_views(params, groups_[0], 0);
      const auto gw = grad_views(params, groups_[0], 0);
      ops.embedding_backward(dx, c.vocab_size, whole(gw[0]));
      params.grad_ready(0);
      params.release(0);
    } else {
      for (int k = 0; k < params.num_pieces(0); ++k) {
        ops.embedding_backward(dx, c.vocab_size, params.grad_piece(0, k));
        params.piece_ready(0, k);
      }
    }
  }

  // Read back only now, once the backward is queued: the device runs it while the host waits.
  if (out) {
    out->rewards.resize(size_t(S));
    ops.to_host(rewards, out->rewards);
    out->pairs = ops.take_pair_stats();
    out->real_tokens = N;
  }
  return N;
}

}  // namespace zero::model
