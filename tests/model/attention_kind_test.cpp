// model.attention: the reward model with the tiled (FlashAttention-2) attention equals the reference
// attention on the transformers fixture within 1e-5 relative: rewards, loss and every gradient, in the
// padded batch and a packed one (several sequences per row: cu_seqlens at work).
//
// data.share_prompt end to end through the model: pairs whose answers share their first tokens, laid out
// with the shared tokens once (data/batch.h) and attended with the rejected rest's hidden span
// (core/math/attention_mask.h), give the rewards, loss and every parameter gradient of the same pairs laid
// out with each answer whole (the layout tested against transformers elsewhere): within 1e-5 relative, on
// the transformers fixture's weights, with the reference and the tiled attention. Shared prompts of 1, 30
// and 70 tokens (across a 64-token tile), a pair that shares nothing, identical answers, and answers of one
// token past the prompt.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/batcher.h"
#include "model/reward_model.h"
#include "model/token_plan.h"
#include "model_test_util.h"

namespace zero::model {
namespace {

struct Result {
  std::vector<float> rewards;
  double loss = 0;
  std::vector<std::vector<float>> grads;  // per tensor, in group order
};

Result run(AttentionKind kind, const data::PairBatch& batch) {
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  DenseParams params(qwen3_rm_groups(config));
  for (const GroupSpec& g : params.groups())
    for (const TensorSpec& t : g.tensors) reader.read_f32(t.name, params.param(t.name));
  RewardModelOptions options;
  options.attention = kind;
  const RewardOutput out = Qwen3RewardModel(config, options).forward_backward(batch, params);
  Result r{out.rewards, out.pairs.loss_sum, {}};
  for (int g = 0; g < params.num_groups(); ++g)
    for (size_t t = 0; t < params.groups()[g].tensors.size(); ++t) {
      const auto s = params.grad(g, int(t));
      r.grads.emplace_back(s.begin(), s.end());
    }
  return r;
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += std::pow(double(a[i]) - b[i], 2), n += double(b[i]) * b[i];
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

TEST(AttentionKind, FlashEqualsReferenceOnTheFixture) {
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const testing::FixtureBatch fb = testing::fixture_batch(reader);
  std::vector<int64_t> order(fb.seqs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(order.size() - 1 - i);  // reversed: not the fixture's
  const std::vector<data::PairBatch> batches = {testing::padded_batch(fb.seqs, 0, fb.row_len),
                                                testing::packed_batch(fb.seqs, 0, 3 * fb.row_len, order)};
  for (const data::PairBatch& batch : batches) {
    const Result ref = run(AttentionKind::Reference, batch), flash = run(AttentionKind::Flash, batch);
    EXPECT_LT(rel(flash.rewards, ref.rewards), 1e-5);
    EXPECT_NEAR(flash.loss, ref.loss, 1e-5 * std::abs(ref.loss));
    ASSERT_EQ(flash.grads.size(), ref.grads.size());
    for (size_t t = 0; t < ref.grads.size(); ++t) EXPECT_LT(rel(flash.grads[t], ref.grads[t]), 1e-5) << "tensor " << t;
    // Not the same code path by accident: the two attentions round differently somewhere.
    bool differ = false;
    for (size_t t = 0; t < ref.grads.size() && !differ; ++t) differ = flash.grads[t] != ref.grads[t];
    EXPECT_TRUE(differ || flash.rewards != ref.rewards) << "flash and reference gave identical bits";
  }
}

TEST(SharedPrompt, SameRewardsLossAndGradientsAsEachAnswerWhole) {
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  const data::PairDataset ds = testing::pairs_with_shared_prompts(config.vocab_size);
  std::vector<int64_t> ids(size_t(ds.num_pairs()));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i);
  for (const int64_t row : {int64_t(0), int64_t(4096)}) {  // one pair a row, then all pairs in one row
    data::BatchConfig whole, shared;
    whole.layout = shared.layout = data::BatchLayout::Packed;
    whole.pack_row_len = shared.pack_row_len = row;
    whole.share_prompt = false;
    const data::PairBatch a = data::make_batch(ds, ids, {}, whole), b = data::make_batch(ds, ids, {}, shared);
    // The shared layout computes fewer tokens, in attention sequences with hidden spans.
    const TokenPlan plan = make_token_plan(b, config.vocab_size);
    EXPECT_LT(b.real_tokens(), a.real_tokens());
    EXPECT_FALSE(plan.hidden.empty());
    EXPECT_LT(plan.num_attention_seqs(), plan.num_seqs());
    for (const AttentionKind kind : {AttentionKind::Reference, AttentionKind::Flash}) {
      SCOPED_TRACE(kind == AttentionKind::Reference ? "reference attention" : "tiled attention");
      const Result want = run(kind, a), got = run(kind, b);
      // Pair order may differ between the layouts: match rewards through pair ids.
      ASSERT_EQ(got.rewards.size(), want.rewards.size());
      EXPECT_LT(rel(testing::rewards_by_pair_id(b, got.rewards), testing::rewards_by_pair_id(a, want.rewards)), 1e-5);
      EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::abs(want.loss));
      ASSERT_EQ(got.grads.size(), want.grads.size());
      for (size_t t = 0; t < want.grads.size(); ++t) EXPECT_LT(rel(got.grads[t], want.grads[t]), 1e-5) << "tensor " << t;
    }
  }
}

// The token plan refuses a shared pair whose rejected rest does not follow its chosen answer.
TEST(SharedPrompt, TokenPlanRefusesARejectedRestAwayFromItsChosenAnswer) {
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  const data::PairDataset ds = testing::pairs_with_shared_prompts(config.vocab_size);
  data::BatchConfig shared;
  shared.layout = data::BatchLayout::Packed;
  data::PairBatch b = data::make_batch(ds, std::vector<int64_t>{0}, {}, shared);
  ASSERT_EQ(b.shared, std::vector<int64_t>{30});
  b.shared[0] = 41;  // more than the chosen answer stores
  EXPECT_THROW(make_token_plan(b, config.vocab_size), InputError);
  b.shared[0] = 29;  // the rejected rest's positions say 30
  EXPECT_THROW(make_token_plan(b, config.vocab_size), InputError);
}

}  // namespace
}  // namespace zero::model
