// Parity of the CPU Qwen3 reward model with HF transformers (tests/fixtures/qwen3_rm_tiny): activations,
// rewards, loss, every parameter gradient, and 5 clipped AdamW steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "checkpoint/safetensors.h"
#include "model/param_access.h"
#include "model/qwen3_config.h"
#include "model/reward_model.h"
#include "model_test_util.h"
#include "optim/adamw.h"

namespace zero::model {
namespace {

using testing::compare;
using testing::Err;

class Qwen3Parity : public ::testing::Test {
 protected:
  void SetUp() override {
    reader_ = std::make_unique<checkpoint::SafetensorsReader>(testing::fixture_file());
    config_ = load_hf_config(testing::fixture_dir() + "/config.json");
    model_ = std::make_unique<Qwen3RewardModel>(config_);
    params_ = std::make_unique<DenseParams>(model_->groups());
    for (const GroupSpec& g : params_->groups())
      for (const TensorSpec& t : g.tensors) {
        ASSERT_EQ(reader_->tensor(t.name).shape, t.shape) << t.name;
        reader_->read_f32(t.name, params_->param(t.name));
      }
    fb_ = testing::fixture_batch(*reader_);
    batch_ = testing::padded_batch(fb_.seqs, int32_t(config_.pad_token_id), fb_.row_len);
  }

  std::unique_ptr<checkpoint::SafetensorsReader> reader_;
  Qwen3Config config_;
  std::unique_ptr<Qwen3RewardModel> model_;
  std::unique_ptr<DenseParams> params_;
  testing::FixtureBatch fb_;
  data::PairBatch batch_;
};

TEST_F(Qwen3Parity, ConfigMatchesFixture) {
  EXPECT_EQ(config_.vocab_size, 997);
  EXPECT_EQ(config_.hidden_size, 48);
  EXPECT_EQ(config_.intermediate_size, 104);
  EXPECT_EQ(config_.num_layers, 2);
  EXPECT_EQ(config_.num_heads, 6);
  EXPECT_EQ(config_.num_kv_heads, 3);
  EXPECT_EQ(config_.head_dim, 12);
  EXPECT_DOUBLE_EQ(config_.rope_theta, 10000.0);  // from rope_parameters (transformers 5 spelling)
  EXPECT_DOUBLE_EQ(config_.rms_norm_eps, 1e-6);
  EXPECT_EQ(config_.pad_token_id, 0);
  EXPECT_EQ(params_->numel(), 98880);
}

TEST_F(Qwen3Parity, ActivationsAtRealPositions) {
  ForwardTrace trace;
  model_->forward(batch_, *params_, &trace);
  const int64_t H = config_.hidden_size, T = fb_.row_len;
  auto check = [&](const std::string& key, const std::vector<float>& got) {  // [N, H]
    const std::vector<float> ref = reader_->read_f32(key);  // [6, T, H]
    std::vector<float> g, r;
    for (size_t s = 0; s < fb_.seqs.size(); ++s)
      for (int64_t t = trace.cu_seqlens[s], j = 0; t < trace.cu_seqlens[s + 1]; ++t, ++j)
        for (int64_t k = 0; k < H; ++k) {
          g.push_back(got[t * H + k]);
          r.push_back(ref[(fb_.fixture_row[s] * T + j) * H + k]);
        }
    const Err e = compare(g, r, 1e-5, 1e-5);
    std::printf("%-22s max abs %.3g  max rel %.3g  norm rel %.3g\n", key.c_str(), e.max_abs, e.max_rel, e.norm_rel);
    EXPECT_EQ(e.bad, 0) << key << " max abs " << e.max_abs;
    EXPECT_LT(e.norm_rel, 1e-5) << key;
  };
  ASSERT_EQ(trace.layer_out.size(), 2u);
  check("act.layer0.out", trace.layer_out[0]);
  check("act.layer1.out", trace.layer_out[1]);
  check("act.final_norm.out", trace.final_norm);
}

TEST_F(Qwen3Parity, RewardsLossAndGradients) {
  const RewardOutput out = model_->forward_backward(batch_, *params_);
  const std::vector<float> ref_rewards = reader_->read_f32("rewards");
  ASSERT_EQ(out.rewards.size(), 6u);
  double worst = 0;
  for (size_t s = 0; s < 6; ++s) {
    const double ref = ref_rewards[fb_.fixture_row[s]];
    worst = std::max(worst, std::abs(out.rewards[s] - ref));
    EXPECT_NEAR(out.rewards[s], ref, 1e-5 + 1e-5 * std::abs(ref)) << "sequence " << s;
  }
  const double ref_loss = reader_->read_f32("loss")[0];
  const double loss = out.pairs.loss_sum / 3.0;  // the fixture's loss is the mean over its 3 pairs
  std::printf("rewards max abs %.3g; loss %.9g vs %.9g (rel %.3g)\n", worst, loss, ref_loss,
              std::abs(loss - ref_loss) / ref_loss);
  EXPECT_NEAR(loss, 0.45910826, 1e-6);
  EXPECT_NEAR(loss, ref_loss, 1e-5 + 1e-5 * ref_loss);
  EXPECT_EQ(out.pairs.real_pairs, 3);
  // HF rewards: chosen 0.393, 0.298, 1.285 vs rejected 0.162, 0.456, -2.762: pairs 0 and 2 are right.
  EXPECT_EQ(out.pairs.correct_pairs, 2);
  EXPECT_NEAR(out.pairs.chosen_reward_sum, 0.39328781 + 0.29756886 + 1.28514719, 1e-5);
  EXPECT_NEAR(out.pairs.rejected_reward_sum, 0.16220143 + 0.45643374 - 2.76152658, 1e-5);
  EXPECT_EQ(out.real_tokens, 17 + 9 + 5 + 12 + 17 + 3);

  double worst_norm_rel = 0, worst_abs = 0;
  for (const GroupSpec& g : params_->groups())
    for (const TensorSpec& t : g.tensors) {
      const std::vector<float> ref = reader_->read_f32("grad." + t.name);
      std::vector<float> got(params_->grad(t.name).begin(), params_->grad(t.name).end());
      for (float& v : got) v /= 3.0f;
      double ref_max = 0;
      for (float v : ref) ref_max = std::max(ref_max, double(std::abs(v)));
      const Err e = compare(got, ref, 1e-4 * ref_max, 1e-4);
      std::printf("grad %-48s max abs %.3g  norm rel %.3g\n", t.name.c_str(), e.max_abs, e.norm_rel);
      worst_norm_rel = std::max(worst_norm_rel, e.norm_rel);
      worst_abs = std::max(worst_abs, e.max_abs);
      EXPECT_LT(e.norm_rel, 1e-4) << t.name;
      EXPECT_EQ(e.bad, 0) << t.name << " max abs " << e.max_abs;
    }
  std::printf("gradients: worst norm rel %.3g, worst max abs %.3g\n", worst_norm_rel, worst_abs);

  // The embedding gradient is exactly zero on the pad row and on ids absent from real positions.
  const std::vector<float> ref = reader_->read_f32("grad.model.embed_tokens.weight");
  std::span<const float> got = params_->grad("model.embed_tokens.weight");
  int64_t zero_rows = 0;
  for (int64_t v = 0; v < config_.vocab_size; ++v) {
    bool ref_zero = true, got_zero = true;
    for (int64_t k = 0; k < config_.hidden_size; ++k) {
      ref_zero = ref_zero && ref[v * 48 + k] == 0.0f;
      got_zero = got_zero && got[v * 48 + k] == 0.0f;
    }
    EXPECT_EQ(ref_zero, got_zero) << "embedding row " << v;
    zero_rows += got_zero;
  }
  EXPECT_EQ(zero_rows, 997 - 62);
}

TEST_F(Qwen3Parity, FiveClippedAdamWSteps) {
  optim::AdamWConfig cfg;
  const float lr = 1e-2f;
  cfg.beta1 = 0.9f;
  cfg.beta2 = 0.95f;
  cfg.eps = 1e-8f;
  cfg.weight_decay = 0.1f;
  const std::vector<float> ref_losses = reader_->read_f32("train.losses");
  const std::vector<float> ref_norms = reader_->read_f32("train.grad_norms");
  const int G = params_->num_groups();
  std::vector<std::vector<std::vector<float>>> m(G), v(G);
  for (int g = 0; g < G; ++g)
    for (const TensorSpec& t : params_->groups()[g].tensors) {
      m[g].emplace_back(t.numel(), 0.0f);
      v[g].emplace_back(t.numel(), 0.0f);
    }
  const double pairs = 3.0;
  for (int step = 1; step <= 5; ++step) {
    const RewardOutput out = model_->forward_backward(batch_, *params_);
    const double loss = out.pairs.loss_sum / pairs;
    double sq = 0;
    for (int g = 0; g < G; ++g)
      for (size_t t = 0; t < params_->groups()[g].tensors.size(); ++t)
        for (float x : params_->grad(g, int(t))) sq += double(x) * double(x);
    const double norm = std::sqrt(sq) / pairs;  // norm of the mean gradient
    const double ref_loss = ref_losses[step - 1], ref_norm = ref_norms[step - 1];
    std::printf("step %d loss %.8g (ref %.8g, rel %.3g)  grad norm %.8g (ref %.8g, rel %.3g)\n", step, loss, ref_loss,
                std::abs(loss - ref_loss) / ref_loss, norm, ref_norm, std::abs(norm - ref_norm) / ref_norm);
    EXPECT_LT(std::abs(loss - ref_loss), 1e-4 * ref_loss) << "step " << step;  // relative to its own scale
    EXPECT_LT(std::abs(norm - ref_norm), 1e-4 * ref_norm) << "step " << step;
    // torch clip_grad_norm_: g *= min(1, max_norm / (norm + 1e-6)); the 1/pairs of the mean folds in too.
    const float clip = std::min(1.0f, float(1.0 / (norm + 1e-6)));
    const float scale = clip / float(pairs);
    for (int g = 0; g < G; ++g)
      for (size_t t = 0; t < params_->groups()[g].tensors.size(); ++t) {
        std::span<float> p = params_->param(g, int(t));
        optim::adamw_step(p.data(), params_->grad(g, int(t)).data(), m[g][t].data(), v[g][t].data(), p.size(), cfg,
                          lr, step, params_->groups()[g].tensors[t].weight_decay, scale);
      }
  }
  double worst = 0;
  std::string worst_name;
  for (const GroupSpec& g : params_->groups())
    for (const TensorSpec& t : g.tensors) {
      const std::vector<float> ref = reader_->read_f32("final." + t.name);
      const Err e = compare(params_->param(t.name), ref, 1e-5, 1e-4);
      if (e.norm_rel > worst) {
        worst = e.norm_rel;
        worst_name = t.name;
      }
      EXPECT_LT(e.norm_rel, 1e-4) << t.name;
    }
  std::printf("final params: worst norm rel %.3g (%s)\n", worst, worst_name.c_str());
}

}  // namespace
}  // namespace zero::model
