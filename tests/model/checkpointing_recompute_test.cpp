// Activation checkpointing must really recompute each layer in backward, not keep forward's activations
// while claiming to be on. Counting acquisitions cannot show it: the recompute reuses backward's
// acquisition (the ParamAccess contract; layout_test checks the call log is the same with and without).
// What only a recompute does is build a layer's activations from the weights handed out in BACKWARD.
// So this access hands layer 0 a perturbed copy of its weights in backward: without checkpointing its
// gradient combines them with forward's cached activations, with checkpointing with recomputed ones, and
// the two gradients differ. Everything backward reaches before layer 0 sees the same weights in both runs
// and must stay bit-identical, so the difference is the recompute and nothing else.
#include <gtest/gtest.h>

#include <vector>

#include "checkpoint/safetensors.h"
#include "model/reward_model.h"
#include "model_test_util.h"

namespace zero::model {
namespace {

// DenseParams, except that backward's acquire(perturbed_group) returns a copy of the group's weights
// scaled by 1.25.
class BackwardPerturbingAccess final : public ParamAccess {
 public:
  BackwardPerturbingAccess(DenseParams& p, int perturbed_group) : p_(p), perturbed_(perturbed_group) {}
  std::vector<TensorRef> acquire(int g) override {
    std::vector<TensorRef> w = p_.acquire(g);
    if (!in_backward_ || g != perturbed_) return w;
    copy_.clear();
    for (size_t t = 0; t < w.size(); ++t) {
      const size_t n = size_t(p_.groups()[g].tensors[t].numel());
      const float* src = static_cast<const float*>(w[t].data);  // DenseParams: fp32 host memory
      copy_.emplace_back(src, src + n);
      for (float& v : copy_.back()) v *= 1.25f;
      w[t].data = copy_.back().data();
    }
    return w;
  }
  void release(int g) override { p_.release(g); }
  void begin_backward() override {
    in_backward_ = true;
    p_.begin_backward();
  }
  std::vector<TensorRef> grad_buffers(int g) override { return p_.grad_buffers(g); }
  void grad_ready(int g) override { p_.grad_ready(g); }

 private:
  DenseParams& p_;
  int perturbed_;
  bool in_backward_ = false;
  std::vector<std::vector<float>> copy_;
};

TEST(ActivationCheckpointing, RecomputesEachLayerFromTheWeightsHandedOutInBackward) {
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  const testing::FixtureBatch fb = testing::fixture_batch(reader);
  const data::PairBatch batch = testing::padded_batch(fb.seqs, 0, fb.row_len);
  const int layer0 = layer_group(0);

  // Every tensor's gradient, group by group, after one forward_backward with layer 0 perturbed in backward.
  auto grads_with = [&](bool checkpointing) {
    DenseParams params(qwen3_rm_groups(config));
    for (const GroupSpec& g : params.groups())
      for (const TensorSpec& t : g.tensors) reader.read_f32(t.name, params.param(t.name));
    RewardModelOptions options;
    options.activation_checkpointing = checkpointing ? ActivationCheckpointing::Full : ActivationCheckpointing::None;
    BackwardPerturbingAccess access(params, layer0);
    Qwen3RewardModel(config, options).forward_backward(batch, access);
    std::vector<std::vector<std::vector<float>>> grads(size_t(params.num_groups()));
    for (int g = 0; g < params.num_groups(); ++g)
      for (size_t t = 0; t < params.groups()[g].tensors.size(); ++t) {
        const auto s = params.grad(g, int(t));
        grads[g].emplace_back(s.begin(), s.end());
      }
    return grads;
  };
  const auto kept = grads_with(false), recomputed = grads_with(true);

  for (int g = layer0 + 1; g < int(kept.size()); ++g) EXPECT_EQ(kept[g], recomputed[g]) << "group " << g;
  for (size_t t = 0; t < kept[layer0].size(); ++t) {
    const testing::Err e = testing::compare(recomputed[layer0][t], kept[layer0][t], 0, 0);
    EXPECT_GT(e.norm_rel, 1e-3) << "layer 0 tensor " << t << ": the same gradient as with forward's activations";
  }
}

}  // namespace
}  // namespace zero::model
