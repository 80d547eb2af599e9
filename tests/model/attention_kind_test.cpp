// model.attention: the reward model with the tiled (FlashAttention-2) attention equals the reference
// attention on the transformers fixture within 1e-5 relative: rewards, loss and every gradient, in the
// padded batch and a packed one (several sequences per row: cu_seqlens at work).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/reward_model.h"
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

}  // namespace
}  // namespace zero::model
