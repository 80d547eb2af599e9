// Selective activation recompute (model.activation_checkpointing: selective): each layer keeps its GEMM
// and attention outputs and drops the element-wise tensors (a, qr, kr, b, m), which are rebuilt before its
// backward from the kept ones. Same inputs, same ops: rewards, loss and every parameter gradient must equal
// those of none and full bit for bit, with fp32 and bf16 parameters, padded and packed batches, on the HF
// fixture and on a larger random model. And it must really keep less: the CPU backend's measured
// activation peak lies strictly between full's and none's, equals model/activation_plan.h's selective
// plan, and is below none's by at least the dropped tensors of all layers but the one being rebuilt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/activation_plan.h"
#include "model/cpu/cpu_model_ops.h"
#include "model/init.h"
#include "model/reward_model.h"
#include "bf16_params.h"
#include "model_test_util.h"

namespace zero::model {
namespace {

using Mode = ActivationCheckpointing;
constexpr Mode kModes[] = {Mode::None, Mode::Selective, Mode::Full};
const char* mode_name(Mode m) { return m == Mode::None ? "none" : m == Mode::Selective ? "selective" : "full"; }

// Bit patterns, so that -0 against 0 or a NaN would count as a difference too.
std::vector<uint32_t> bit_patterns(std::span<const float> v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}
std::vector<uint32_t> bit_patterns(std::span<const bf16> v) {
  std::vector<uint32_t> out;
  for (bf16 x : v) out.push_back(testing::bits(x));
  return out;
}

struct Outcome {
  std::vector<uint32_t> rewards;
  double loss_sum = 0;
  std::vector<std::vector<uint32_t>> grads;  // every tensor, group order
  size_t peak = 0;                           // ModelOps' activation bytes at their peak
};

// One forward_backward on fresh CPU ops; parameters fp32 (dense) or bf16 (half, same values).
Outcome run(const Qwen3Config& c, Mode mode, const data::PairBatch& batch, DenseParams& dense, testing::Bf16Params* half,
            int64_t selective_layers = 0, bool recompute_attention = false) {
  auto owned = make_cpu_model_ops();
  const ModelOps* ops = owned.get();
  RewardModelOptions o;
  o.activation_checkpointing = mode;
  o.selective_layers = selective_layers;
  o.recompute_attention = recompute_attention;
  const Qwen3RewardModel m(c, o, std::move(owned));
  const RewardOutput out = half ? m.forward_backward(batch, *half) : m.forward_backward(batch, dense);
  EXPECT_EQ(ops->live_bytes(), 0u) << "every activation is freed after forward_backward";
  Outcome r{bit_patterns(out.rewards), out.pairs.loss_sum, {}, ops->peak_bytes()};
  for (int g = 0; g < dense.num_groups(); ++g)
    for (size_t t = 0; t < dense.groups()[g].tensors.size(); ++t)
      r.grads.push_back(half ? bit_patterns(std::span<const bf16>(half->grad(g, t))) : bit_patterns(dense.grad(g, int(t))));
  return r;
}

struct Case {
  Qwen3Config config;
  std::unique_ptr<DenseParams> params;
  std::vector<std::vector<int32_t>> seqs;
  int64_t tokens = 0, longest = 0;
};

Case fixture_case() {
  checkpoint::SafetensorsReader r(testing::fixture_file());
  Case k;
  k.config = load_hf_config(testing::fixture_dir() + "/config.json");
  k.params = std::make_unique<DenseParams>(qwen3_rm_groups(k.config));
  for (const GroupSpec& g : k.params->groups())
    for (const TensorSpec& t : g.tensors) r.read_f32(t.name, k.params->param(t.name));
  k.seqs = testing::fixture_batch(r).seqs;
  return k;
}

// Larger than the fixture in every direction the layer has (3 layers, GQA 6/2, MLP 3x hidden).
Case random_case() {
  Case k;
  k.config = tiny_qwen3_config();
  k.config.num_layers = 3, k.config.hidden_size = 96, k.config.intermediate_size = 288;
  k.config.num_heads = 6, k.config.num_kv_heads = 2, k.config.head_dim = 16;
  k.params = std::make_unique<DenseParams>(qwen3_rm_groups(k.config));
  init_random(*k.params, k.config, 11);
  std::mt19937 rng(17);
  for (int64_t len : {13, 7, 21, 9, 16, 4, 11, 18}) {
    std::vector<int32_t> s(static_cast<size_t>(len));
    for (auto& t : s) t = int32_t(1 + rng() % uint32_t(k.config.vocab_size - 1));
    k.seqs.push_back(s);
  }
  return k;
}

void finish(Case& k) {
  for (const auto& s : k.seqs) k.tokens += int64_t(s.size()), k.longest = std::max(k.longest, int64_t(s.size()));
}

TEST(SelectiveRecompute, BitIdenticalToNoneAndFull) {
  std::vector<Case> cases;
  cases.push_back(fixture_case());
  cases.push_back(random_case());
  for (Case& k : cases) {
    finish(k);
    std::vector<int64_t> order(k.seqs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(order.size() - 1 - i);  // rows mix pairs
    const data::PairBatch padded = testing::padded_batch(k.seqs, 0);
    const data::PairBatch packed = testing::packed_batch(k.seqs, 0, 2 * k.longest, order);
    testing::Bf16Params half(*k.params);
    for (const data::PairBatch* batch : {&padded, &packed})
      for (bool bf16_params : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "layers " << k.config.num_layers << (batch == &padded ? " padded" : " packed")
                                          << (bf16_params ? " bf16" : " fp32") << " parameters");
        const Outcome none = run(k.config, Mode::None, *batch, *k.params, bf16_params ? &half : nullptr);
        for (Mode mode : {Mode::Selective, Mode::Full}) {
          const Outcome r = run(k.config, mode, *batch, *k.params, bf16_params ? &half : nullptr);
          EXPECT_EQ(r.rewards, none.rewards) << mode_name(mode);
          EXPECT_EQ(r.loss_sum, none.loss_sum) << mode_name(mode);
          ASSERT_EQ(r.grads.size(), none.grads.size());
          for (size_t t = 0; t < r.grads.size(); ++t) EXPECT_EQ(r.grads[t], none.grads[t]) << mode_name(mode) << " tensor " << t;
        }
        // Full with its last layers selective (model.selective_layers), every split of the layers, with the
        // attention of its fully recomputed layers kept (the default) or recomputed (model.recompute_attention).
        for (bool recompute : {false, true})
          for (int64_t sel = recompute ? 0 : 1; sel < k.config.num_layers; ++sel) {
            SCOPED_TRACE(::testing::Message() << "selective_layers " << sel << " recompute_attention " << recompute);
            const Outcome r = run(k.config, Mode::Full, *batch, *k.params, bf16_params ? &half : nullptr, sel, recompute);
            EXPECT_EQ(r.rewards, none.rewards);
            EXPECT_EQ(r.loss_sum, none.loss_sum);
            for (size_t t = 0; t < r.grads.size(); ++t) EXPECT_EQ(r.grads[t], none.grads[t]) << "tensor " << t;
          }
      }
  }
}

TEST(SelectiveRecompute, KeepsLessThanNoneAndMoreThanFullAsPlanned) {
  Case k = random_case();
  finish(k);
  const data::PairBatch batch = testing::packed_batch(k.seqs, 0, 2 * k.longest, {0, 1, 2, 3, 4, 5, 6, 7});
  size_t peak[3];
  for (Mode mode : kModes) {
    peak[int(mode)] = run(k.config, mode, batch, *k.params, nullptr).peak;
    EXPECT_EQ(peak[int(mode)], plan_activations(k.config, k.tokens, int64_t(k.seqs.size()), mode, kCpuActivations).peak)
        << mode_name(mode);
  }
  EXPECT_LT(peak[int(Mode::Full)], peak[int(Mode::Selective)]);
  EXPECT_LT(peak[int(Mode::Selective)], peak[int(Mode::None)]);
  // Full with its last layers selective: as planned, and more selective layers keep no less (3 layers here:
  // with one, the kept part of the last layer is what full's backward rebuilds for it anyway).
  size_t previous = peak[int(Mode::Full)];
  for (int64_t sel = 1; sel < k.config.num_layers; ++sel) {
    const size_t mixed = run(k.config, Mode::Full, batch, *k.params, nullptr, sel).peak;
    EXPECT_EQ(mixed, plan_activations(k.config, k.tokens, int64_t(k.seqs.size()), Mode::Full, kCpuActivations, sel).peak)
        << "selective_layers " << sel;
    EXPECT_GE(mixed, previous) << "selective_layers " << sel;
    EXPECT_LT(mixed, peak[int(Mode::Selective)] + size_t(k.tokens) * 1200 * 4) << "selective_layers " << sel;
    previous = mixed;
  }
  EXPECT_GT(previous, peak[int(Mode::Full)]);
  // Full with its attention recomputed keeps less than full, as planned.
  const size_t least = run(k.config, Mode::Full, batch, *k.params, nullptr, 0, true).peak;
  EXPECT_EQ(least, plan_activations(k.config, k.tokens, int64_t(k.seqs.size()), Mode::Full, kCpuActivations, 0, true).peak);
  EXPECT_LT(least, peak[int(Mode::Full)]);
  // The dropped tensors, fp32 on the CPU: a and b [R, 96], qr [R, 96], kr [R, 32], m [R, 288].
  const size_t dropped_per_layer = size_t(k.tokens) * (96 + 96 + 96 + 32 + 288) * 4;
  EXPECT_GE(peak[int(Mode::None)] - peak[int(Mode::Selective)], size_t(k.config.num_layers - 1) * dropped_per_layer);
}

}  // namespace
}  // namespace zero::model
