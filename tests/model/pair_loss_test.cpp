// The pair loss with margins and reward centering: literal values (computed with mpmath at 30 digits from
// -logsigmoid(r_c - r_r - m) + c (r_c + r_r)^2 and its derivatives), its gradient against central
// differences of its own loss, and the reward model carrying a batch's margins into the loss and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/cpu/pair_loss.h"
#include "model/param_access.h"
#include "model/param_layout.h"
#include "model/reward_model.h"
#include "model_test_util.h"

namespace zero::model {
namespace {

const std::vector<float> kRewards = {1.0f, 0.0f, 0.3f, 0.7f, 2.0f, -1.0f};
const std::vector<float> kMargins = {0.5f, 0.0f, 3.0f};
const std::vector<uint8_t> kMask = {1, 1, 0};  // the last pair a masked filler

TEST(PairLoss, MarginAndCenteringMatchLiteralValues) {
  std::vector<float> d(6, NAN);
  const PairStats s = cpu::pair_loss(kRewards, {.mask = kMask, .margin = kMargins, .center = 0.01}, d);
  EXPECT_NEAR(s.loss_sum, 0.48407698418010668 + 0.92301523812612657, 1e-15);
  EXPECT_NEAR(d[0], -0.35754066879814543, 1e-7);
  EXPECT_NEAR(d[1], 0.39754066879814544, 1e-7);
  EXPECT_NEAR(d[2], -0.57868765438418943, 1e-7);
  EXPECT_NEAR(d[3], 0.61868765438418943, 1e-7);
  EXPECT_EQ(d[4], 0.0f);  // masked: no loss, no gradient
  EXPECT_EQ(d[5], 0.0f);
  EXPECT_EQ(s.real_pairs, 2);
  EXPECT_EQ(s.correct_pairs, 1);  // accuracy is r_c > r_r, margin or not
  EXPECT_NEAR(s.chosen_reward_sum, 1.3, 1e-7);
  EXPECT_NEAR(s.rejected_reward_sum, 0.7, 1e-7);
}

TEST(PairLoss, WithoutMarginOrCenteringItIsTheLogisticLoss) {
  std::vector<float> d(6, NAN);
  const PairStats s = cpu::pair_loss(kRewards, {.mask = kMask}, d);
  // log(1 + e^-1) + log(1 + e^0.4), the 0.3f and 0.7f as floats.
  EXPECT_NEAR(s.loss_sum, 0.31326168751822283 + 0.91301523812612657, 1e-15);
  EXPECT_NEAR(d[0], -0.26894142136999512, 1e-7);
  // Zero margins and centering 0 change no bit.
  std::vector<float> d0(6, NAN);
  const std::vector<float> zeros(3, 0.0f);
  EXPECT_EQ(cpu::pair_loss(kRewards, {.mask = kMask, .margin = zeros, .center = 0.0}, d0).loss_sum, s.loss_sum);
  EXPECT_EQ(d0, d);
}

// Groups (pmtrain's training sets): each group's sums over its own real pairs, the literal values above;
// the total, the gradient and the masked pair as without groups.
TEST(PairLoss, GroupsSumTheirOwnRealPairs) {
  const std::vector<int32_t> group = {2, 0, 2};  // pair 0 and the masked pair 2 in group 2, pair 1 in 0, none in 1
  std::vector<float> d(6, NAN), d_plain(6, NAN);
  const PairStats s = cpu::pair_loss(kRewards, {.mask = kMask, .margin = kMargins, .center = 0.01, .group = group, .groups = 3}, d);
  const PairStats plain = cpu::pair_loss(kRewards, {.mask = kMask, .margin = kMargins, .center = 0.01}, d_plain);
  EXPECT_TRUE(plain.groups.empty());
  EXPECT_EQ(s.loss_sum, plain.loss_sum);
  EXPECT_EQ(d, d_plain);
  ASSERT_EQ(s.groups.size(), 3u);
  EXPECT_NEAR(s.groups[0].loss_sum, 0.92301523812612657, 1e-15);
  EXPECT_EQ(s.groups[0].real_pairs, 1);
  EXPECT_EQ(s.groups[0].correct_pairs, 0);  // 0.3 < 0.7
  EXPECT_NEAR(s.groups[0].chosen_reward_sum, 0.3, 1e-7);
  EXPECT_NEAR(s.groups[0].rejected_reward_sum, 0.7, 1e-7);
  EXPECT_EQ(s.groups[1].real_pairs, 0);
  EXPECT_EQ(s.groups[1].loss_sum, 0.0);
  EXPECT_NEAR(s.groups[2].loss_sum, 0.48407698418010668, 1e-15);
  EXPECT_EQ(s.groups[2].real_pairs, 1);  // the masked pair is not counted
  EXPECT_EQ(s.groups[2].correct_pairs, 1);
  EXPECT_EQ(s.groups[2].chosen_reward_sum, 1.0);
  EXPECT_EQ(s.groups[2].rejected_reward_sum, 0.0);
  // Added call to call, group by group (a step's micro-batches).
  PairStats two = s;
  two.add(s);
  ASSERT_EQ(two.groups.size(), 3u);
  EXPECT_EQ(two.groups[2].real_pairs, 2);
  EXPECT_EQ(two.groups[0].loss_sum, 2 * s.groups[0].loss_sum);
}

TEST(PairLoss, GradientIsTheLossDerivative) {
  const std::vector<uint8_t> all = {1, 1, 1};
  const PairLossInputs in{.mask = all, .margin = kMargins, .center = 0.05};
  std::vector<float> d(6);
  cpu::pair_loss(kRewards, in, d);
  const float h = 1.0f / 1024;  // exact in float at these magnitudes
  for (size_t k = 0; k < kRewards.size(); ++k) {
    std::vector<float> up = kRewards, down = kRewards;
    up[k] += h, down[k] -= h;
    const double fd = (cpu::pair_loss(up, in).loss_sum - cpu::pair_loss(down, in).loss_sum) / (2.0 * h);
    EXPECT_NEAR(d[k], fd, 1e-6) << "reward " << k;
  }
}

// The fixture model on one pair: a margin m scales the plain loss's gradient by sigmoid(z + m) / sigmoid(z)
// (z = r_r - r_c), every parameter alike, and the loss is softplus(z + m) + c (r_c + r_r)^2 of the rewards.
TEST(PairLoss, TheModelCarriesTheBatchsMarginsIntoLossAndBackward) {
  checkpoint::SafetensorsReader r(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  DenseParams params(qwen3_rm_groups(config));
  for (const GroupSpec& g : params.groups())
    for (const TensorSpec& t : g.tensors) r.read_f32(t.name, params.param(t.name));
  const testing::FixtureBatch fb = testing::fixture_batch(r);
  data::PairBatch batch = testing::padded_batch({fb.seqs[0], fb.seqs[1]}, 0);

  const Qwen3RewardModel plain_model(config);
  const RewardOutput plain = plain_model.forward_backward(batch, params);
  std::vector<std::vector<float>> plain_grads;
  for (int g = 0; g < params.num_groups(); ++g)
    for (size_t t = 0; t < params.groups()[g].tensors.size(); ++t) {
      const auto gr = params.grad(g, int(t));
      plain_grads.emplace_back(gr.begin(), gr.end());
    }
  const double rc = plain.rewards[0], rr = plain.rewards[1], z = rr - rc;

  const float m = 1.5f;
  batch.pair_margin = {m};
  const RewardOutput with_margin = plain_model.forward_backward(batch, params);
  EXPECT_EQ(with_margin.rewards, plain.rewards);
  EXPECT_NEAR(with_margin.pairs.loss_sum, std::log1p(std::exp(z + m)), 1e-12);
  const double scale = (1 / (1 + std::exp(-(z + m)))) / (1 / (1 + std::exp(-z)));
  ASSERT_GT(scale, 1.5);  // the margin changes the gradient visibly
  size_t k = 0;
  for (int g = 0; g < params.num_groups(); ++g)
    for (size_t t = 0; t < params.groups()[g].tensors.size(); ++t, ++k) {
      const auto gr = params.grad(g, int(t));
      double num = 0, den = 0;
      for (size_t i = 0; i < gr.size(); ++i) {
        const double want = scale * plain_grads[k][i];
        num += (gr[i] - want) * (gr[i] - want), den += want * want;
      }
      EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), 1e-5) << params.groups()[g].tensors[t].name;
    }

  RewardModelOptions centered;
  centered.center_rewards = 0.1;
  const Qwen3RewardModel centered_model(config, centered);
  const RewardOutput c = centered_model.forward(batch, params);
  EXPECT_NEAR(c.pairs.loss_sum, std::log1p(std::exp(z + m)) + 0.1 * (rc + rr) * (rc + rr), 1e-12);
}

}  // namespace
}  // namespace zero::model
