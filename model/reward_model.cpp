// Qwen3RewardModel: the group-by-group forward and backward through ParamAccess.
#include "model/reward_model.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "model/decoder_layer.h"
#include "model/pair_loss.h"
#include "model/rmsnorm.h"
#include "model/rope.h"
#include "model/token_plan.h"

namespace zero::model {

namespace {

// Acquires a group and checks it has the tensor count the model expects.
std::vector<const float*> acquire_checked(ParamAccess& p, int g, size_t expect) {
  std::vector<const float*> w = p.acquire(g);
  ZERO_CHECK(w.size() == expect, "group {}: ParamAccess gave {} tensors, the model expects {}", g, w.size(), expect);
  return w;
}
std::vector<float*> grads_checked(ParamAccess& p, int g, size_t expect) {
  std::vector<float*> w = p.grad_buffers(g);
  ZERO_CHECK(w.size() == expect, "group {}: ParamAccess gave {} gradient buffers, the model expects {}", g, w.size(),
             expect);
  return w;
}

// The score head on the pooled tokens: xn = model.norm(h[:, pooled]) [H, S], r = score . xn.
struct HeadCache {
  Mat hp;    // [H, S] pooled residual stream
  Vec rstd;  // [S]
  Mat xn;    // [H, S]
};

void head_forward(const Qwen3Config& c, std::span<const float* const> w, const Mat& h, std::span<const int64_t> pooled,
                  HeadCache& hc, std::vector<float>& rewards) {
  const int64_t H = c.hidden_size, S = static_cast<int64_t>(pooled.size());
  hc.hp.resize(H, S);
  for (int64_t s = 0; s < S; ++s) hc.hp.col(s) = h.col(pooled[s]);
  hc.xn.resize(H, S);
  hc.rstd.resize(S);
  rmsnorm_forward(hc.hp.data(), w[kFinalNorm], H, S, float(c.rms_norm_eps), hc.xn.data(), hc.rstd.data());
  Eigen::Map<const Vec> score(w[kScore], H);
  rewards.resize(S);
  for (int64_t s = 0; s < S; ++s) rewards[s] = score.dot(hc.xn.col(s));
}

}  // namespace

Qwen3RewardModel::Qwen3RewardModel(Qwen3Config config, RewardModelOptions options)
    : config_(std::move(config)), options_(options), groups_(qwen3_rm_groups(config_, options_.decay)) {}

RewardOutput Qwen3RewardModel::forward_backward(const data::PairBatch& batch, ParamAccess& params) const {
  return run(batch, params, true, nullptr);
}

RewardOutput Qwen3RewardModel::forward(const data::PairBatch& batch, ParamAccess& params, ForwardTrace* trace) const {
  return run(batch, params, false, trace);
}

RewardOutput Qwen3RewardModel::run(const data::PairBatch& batch, ParamAccess& params, bool backward,
                                   ForwardTrace* trace) const {
  const Qwen3Config& c = config_;
  const int64_t H = c.hidden_size, L = c.num_layers;
  const int head = head_group(c);
  const bool ckpt = options_.activation_checkpointing;

  const TokenPlan plan = make_token_plan(batch, c.vocab_size);
  const int64_t N = plan.num_tokens();
  const RopeTable rope = make_rope_table(plan.positions, c.head_dim, c.rope_theta);
  const LayerContext ctx{plan.seqs, &rope};
  if (trace) {
    trace->seqs = plan.seqs;
    trace->layer_out.clear();
  }

  // ---- forward -------------------------------------------------------------------------------------
  Mat x(H, N);  // [H, N] residual stream
  {
    auto w = acquire_checked(params, 0, 1);
    for (int64_t t = 0; t < N; ++t)
      std::memcpy(x.col(t).data(), w[0] + int64_t(plan.tokens[t]) * H, sizeof(float) * H);  // embedding row
    params.release(0);
  }
  std::vector<Mat> inputs(backward ? L : 0);          // each layer's input, kept for backward
  std::vector<LayerCache> caches(backward && !ckpt ? L : 0);
  LayerCache scratch;                                 // forward-only and checkpointed layers
  for (int64_t l = 0; l < L; ++l) {
    const int g = layer_group(int(l));
    auto w = acquire_checked(params, g, kLayerTensors);
    Mat y;
    LayerCache& cache = caches.empty() ? scratch : caches[l];
    decoder_layer_forward(c, w, ctx, x, y, cache);
    params.release(g);
    if (backward) inputs[l] = std::move(x);
    x = std::move(y);
    if (trace) trace->layer_out.push_back(x);
  }
  scratch = LayerCache();  // free the last forward-only layer's activations before the head

  RewardOutput out;
  HeadCache hc;
  {
    auto w = acquire_checked(params, head, kHeadTensors);
    head_forward(c, w, x, plan.pooled, hc, out.rewards);
    if (trace) {
      trace->final_norm.resize(H, N);
      Vec rstd(N);
      rmsnorm_forward(x.data(), w[kFinalNorm], H, N, float(c.rms_norm_eps), trace->final_norm.data(), rstd.data());
    }
    params.release(head);
  }
  std::vector<float> dr(backward ? out.rewards.size() : 0);
  const PairStats st = pair_loss(out.rewards, batch.pair_mask, dr);
  out.loss_sum = st.loss_sum;
  out.real_pairs = st.real_pairs;
  out.correct_pairs = st.correct_pairs;
  out.chosen_reward_sum = st.chosen_reward_sum;
  out.rejected_reward_sum = st.rejected_reward_sum;
  out.real_tokens = N;
  if (!backward) return out;

  // ---- backward ------------------------------------------------------------------------------------
  params.begin_backward();
  Mat dx = Mat::Zero(H, N);  // d loss / d residual stream
  {
    auto w = acquire_checked(params, head, kHeadTensors);
    auto gw = grads_checked(params, head, kHeadTensors);
    const int64_t S = static_cast<int64_t>(dr.size());
    Eigen::Map<const Vec> score(w[kScore], H);
    Eigen::Map<const Vec> drv(dr.data(), S);
    Eigen::Map<Vec>(gw[kScore], H).noalias() = hc.xn * drv;  // d score = sum_s dr_s xn_s
    Mat dxn = score * drv.transpose();                       // [H, S]
    Mat dhp(H, S);
    rmsnorm_backward(hc.hp.data(), w[kFinalNorm], hc.rstd.data(), dxn.data(), H, S, dhp.data(), gw[kFinalNorm]);
    for (int64_t s = 0; s < S; ++s) dx.col(plan.pooled[s]) += dhp.col(s);
    params.grad_ready(head);
    params.release(head);
  }
  for (int64_t l = L - 1; l >= 0; --l) {
    const int g = layer_group(int(l));
    auto w = acquire_checked(params, g, kLayerTensors);
    LayerCache* cache = &scratch;
    if (ckpt) {
      Mat y;  // recompute: same inputs, same code, so the same activations bit for bit
      decoder_layer_forward(c, w, ctx, inputs[l], y, scratch);
    } else {
      cache = &caches[l];
    }
    auto gw = grads_checked(params, g, kLayerTensors);
    Mat dprev;
    decoder_layer_backward(c, w, gw, ctx, inputs[l], *cache, dx, dprev);
    dx = std::move(dprev);
    params.grad_ready(g);
    params.release(g);
    if (!ckpt) caches[l] = LayerCache();  // done with this layer's activations
    inputs[l] = Mat();
  }
  {
    acquire_checked(params, 0, 1);
    auto gw = grads_checked(params, 0, 1);
    // Embedding: scatter-add each token's gradient into its row; rows of unused ids are exactly 0.
    std::fill_n(gw[0], c.vocab_size * H, 0.0f);
    for (int64_t t = 0; t < N; ++t) Eigen::Map<Vec>(gw[0] + int64_t(plan.tokens[t]) * H, H) += dx.col(t);
    params.grad_ready(0);
    params.release(0);
  }
  return out;
}

}  // namespace zero::model
