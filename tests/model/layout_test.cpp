// The reward model's batch handling and contract: packed == padded, activation checkpointing changes nothing,
// pads are never computed, masked pairs contribute nothing, and the ParamAccess call order is the contract's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "core/math/attention_mask.h"
#include "model/init.h"
#include "model/param_access.h"
#include "model/qwen3_config.h"
#include "model/reward_model.h"
#include "model/token_plan.h"
#include "model_test_util.h"

namespace zero::model {
namespace {

using testing::compare;

// Forwards to DenseParams and records every call as "a3", "r3", "B", "g3", "d3" (acquire, release,
// begin_backward, grad_buffers, grad_ready).
class RecordingAccess final : public ParamAccess {
 public:
  explicit RecordingAccess(DenseParams& p) : p_(p) {}
  std::vector<TensorRef> acquire(int g) override { log.push_back("a" + std::to_string(g)); return p_.acquire(g); }
  void release(int g) override { log.push_back("r" + std::to_string(g)); p_.release(g); }
  void begin_backward() override { log.push_back("B"); p_.begin_backward(); }
  std::vector<TensorRef> grad_buffers(int g) override {
    log.push_back("g" + std::to_string(g));
    auto b = p_.grad_buffers(g);
    for (size_t t = 0; t < b.size(); ++t) {  // garbage in: the model must overwrite every element
      std::span<float> s = p_.grad(g, int(t));
      std::fill(s.begin(), s.end(), 12345.0f);
    }
    return b;
  }
  void grad_ready(int g) override { log.push_back("d" + std::to_string(g)); p_.grad_ready(g); }
  std::vector<std::string> log;

 private:
  DenseParams& p_;
};

struct Result {
  std::vector<float> rewards;
  double loss_sum = 0;
  std::vector<std::vector<float>> grads;  // per tensor, group order
};

class Layouts : public ::testing::Test {
 protected:
  void SetUp() override {
    checkpoint::SafetensorsReader r(testing::fixture_file());
    config_ = load_hf_config(testing::fixture_dir() + "/config.json");
    params_ = std::make_unique<DenseParams>(qwen3_rm_groups(config_));
    for (const GroupSpec& g : params_->groups())
      for (const TensorSpec& t : g.tensors) r.read_f32(t.name, params_->param(t.name));
    fb_ = testing::fixture_batch(r);
  }

  Result run(const data::PairBatch& b, ActivationCheckpointing checkpointing = ActivationCheckpointing::None) {
    RewardModelOptions o;
    o.activation_checkpointing = checkpointing;
    Qwen3RewardModel m(config_, o);
    RecordingAccess acc(*params_);
    const RewardOutput out = m.forward_backward(b, acc);
    Result res{out.rewards, out.pairs.loss_sum, {}};
    for (int g = 0; g < params_->num_groups(); ++g)
      for (size_t t = 0; t < params_->groups()[g].tensors.size(); ++t) {
        auto s = params_->grad(g, int(t));
        res.grads.emplace_back(s.begin(), s.end());
      }
    log_ = acc.log;
    return res;
  }

  static void expect_close(const Result& a, const Result& b, double tol) {
    ASSERT_EQ(a.rewards.size(), b.rewards.size());
    for (size_t s = 0; s < a.rewards.size(); ++s) EXPECT_NEAR(a.rewards[s], b.rewards[s], tol) << "sequence " << s;
    EXPECT_NEAR(a.loss_sum, b.loss_sum, tol);
    ASSERT_EQ(a.grads.size(), b.grads.size());
    for (size_t t = 0; t < a.grads.size(); ++t) {
      const auto e = compare(a.grads[t], b.grads[t], tol, tol);
      EXPECT_EQ(e.bad, 0) << "tensor " << t << " max abs " << e.max_abs;
    }
  }

  Qwen3Config config_;
  std::unique_ptr<DenseParams> params_;
  testing::FixtureBatch fb_;
  std::vector<std::string> log_;
};

// The parameters copied tensor by tensor into storage of their own (as staged views are): no two tensors
// back to back, so the layer cannot fuse q/k/v or gate/up. With shared_weights, the weights are src's own
// (back to back) and only the gradients apart: forward fuses, backward cannot.
class PerTensorParams final : public ParamAccess {
 public:
  explicit PerTensorParams(DenseParams& src, bool shared_weights = false) : src_(src), shared_(shared_weights) {
    for (int g = 0; g < src.num_groups(); ++g) {
      params_.emplace_back(), grads_.emplace_back();
      for (size_t t = 0; t < src.groups()[g].tensors.size(); ++t) {
        auto p = src.param(g, int(t));
        params_[g].emplace_back(p.begin(), p.end());
        grads_[g].emplace_back(p.size());
      }
    }
  }
  std::vector<TensorRef> acquire(int g) override { return shared_ ? src_.acquire(g) : views(g, params_); }
  void release(int g) override {
    if (shared_) src_.release(g);
  }
  void begin_backward() override {}
  std::vector<TensorRef> grad_buffers(int g) override { return views(g, grads_); }
  void grad_ready(int) override {}
  std::vector<std::vector<std::vector<float>>> params_, grads_;

 private:
  std::vector<TensorRef> views(int g, std::vector<std::vector<std::vector<float>>>& s) const {
    std::vector<TensorRef> out;
    for (size_t t = 0; t < s[g].size(); ++t)
      out.emplace_back(s[g][t].data(), DType::F32, src_.groups()[g].tensors[t].shape);
    return out;
  }
  DenseParams& src_;
  bool shared_;
};

// q/k/v_proj and gate/up_proj back to back (DenseParams' flat groups, the engine's views): one GEMM each
// way for each set, counted at the ops' clock (per layer forward q+k+v, o, gate+up, down; backward two
// each); weights apart, a GEMM each way per tensor; weights together but gradients apart, forward fused and
// backward per tensor (its ops then read the fused outputs' column views and write packed gradients). The
// same numbers every way to fp32 rounding (the GEMMs block the sums by their own shapes).
TEST_F(Layouts, FusedProjectionsAreOneGemmWhenBackToBack) {
  const data::PairBatch batch = testing::padded_batch(fb_.seqs, 0, fb_.row_len);
  auto gemms = [&](ParamAccess& access, Result& res, auto grad_of) {
    Qwen3RewardModel m(config_, RewardModelOptions{});
    HostStepClock clock;
    m.ops().set_step_clock(&clock);
    const RewardOutput out = m.forward_backward(batch, access);
    res = {out.rewards, out.pairs.loss_sum, {}};
    for (int g = 0; g < params_->num_groups(); ++g)
      for (size_t t = 0; t < params_->groups()[g].tensors.size(); ++t) res.grads.push_back(grad_of(g, t));
    return clock.take().calls_of(TimeCategory::Gemm);
  };
  Result fused, apart;
  PerTensorParams separate(*params_);
  const uint64_t fused_gemms = gemms(*params_, fused, [&](int g, size_t t) {
    auto s = params_->grad(g, int(t));
    return std::vector<float>(s.begin(), s.end());
  });
  const uint64_t apart_gemms = gemms(separate, apart, [&](int g, size_t t) { return separate.grads_[g][t]; });
  Result mixed;
  PerTensorParams grads_apart(*params_, true);
  const uint64_t mixed_gemms = gemms(grads_apart, mixed, [&](int g, size_t t) { return grads_apart.grads_[g][t]; });
  const uint64_t L = uint64_t(config_.num_layers);
  // GEMM scopes: a forward a projection, and a linear_backward (its input and weight gradients' two GEMMs).
  EXPECT_EQ(fused_gemms, L * (4 + 4));
  EXPECT_EQ(apart_gemms, L * (7 + 7));
  EXPECT_EQ(mixed_gemms, L * (4 + 7));
  expect_close(fused, apart, 1e-5);
  expect_close(fused, mixed, 1e-5);
}

TEST_F(Layouts, PackedEqualsPadded) {
  const data::PairBatch padded = testing::padded_batch(fb_.seqs, 0, fb_.row_len);
  // Rows of 32 columns, sequences placed out of order so that rows mix pairs: [17+12], [9+17+5], [3].
  const data::PairBatch packed = testing::packed_batch(fb_.seqs, 0, 32, {0, 1, 2, 3, 4, 5});
  ASSERT_LT(packed.rows, padded.rows);
  const data::PairBatch shuffled = testing::packed_batch(fb_.seqs, 0, 40, {5, 3, 1, 4, 0, 2});
  ASSERT_EQ(shuffled.rows, 2);
  const Result a = run(padded), b = run(packed), c = run(shuffled);
  expect_close(a, b, 1e-5);
  expect_close(a, c, 1e-5);
  EXPECT_NEAR(a.rewards[0], 0.39328781, 1e-5);  // the HF value, so neither run is trivially wrong
}

TEST_F(Layouts, CheckpointingIsBitIdentical) {
  const data::PairBatch padded = testing::padded_batch(fb_.seqs, 0, fb_.row_len);
  const Result a = run(padded);
  const std::vector<std::string> log_plain = log_;
  for (ActivationCheckpointing mode : {ActivationCheckpointing::Selective, ActivationCheckpointing::Full}) {
    const Result b = run(padded, mode);
    EXPECT_EQ(a.rewards, b.rewards);
    EXPECT_EQ(a.loss_sum, b.loss_sum);
    EXPECT_EQ(a.grads, b.grads);
    EXPECT_EQ(log_plain, log_);  // recompute reuses the backward acquisition
  }
}

TEST_F(Layouts, ContractCallOrder) {
  run(testing::padded_batch(fb_.seqs, 0, fb_.row_len), ActivationCheckpointing::Full);
  const int G = params_->num_groups();  // 4: embed, 2 layers, head
  std::vector<std::string> want;
  for (int g = 0; g < G; ++g) {
    want.push_back("a" + std::to_string(g));
    want.push_back("r" + std::to_string(g));
  }
  want.push_back("B");
  for (int g = G - 1; g >= 0; --g)
    for (const char* op : {"a", "g", "d", "r"}) want.push_back(op + std::to_string(g));
  EXPECT_EQ(log_, want);
}

TEST_F(Layouts, PadsAreNeverComputed) {
  data::PairBatch a = testing::padded_batch(fb_.seqs, 0, 24);
  data::PairBatch b = a;
  for (int64_t i = 0; i < b.rows * b.row_len; ++i) {  // fill every pad slot with a real id
    const int64_t row = i / b.row_len, col = i % b.row_len;
    if (col >= b.seq_len[row]) b.tokens[i] = 7 + int32_t(col);
  }
  const Result ra = run(a), rb = run(b);
  EXPECT_EQ(ra.rewards, rb.rewards);
  EXPECT_EQ(ra.grads, rb.grads);
}

TEST_F(Layouts, MaskedPairContributesNothing) {
  // 3 pairs with pair 1 masked vs the 2 real pairs alone.
  data::PairBatch masked = testing::padded_batch(fb_.seqs, 0, fb_.row_len);
  masked.pair_mask[1] = 0;
  std::vector<std::vector<int32_t>> two = {fb_.seqs[0], fb_.seqs[1], fb_.seqs[4], fb_.seqs[5]};
  const data::PairBatch alone = testing::padded_batch(two, 0, fb_.row_len);
  Qwen3RewardModel m(config_);
  const RewardOutput om = m.forward(masked, *params_);
  EXPECT_EQ(om.pairs.real_pairs, 2);
  EXPECT_EQ(om.rewards.size(), 6u);  // every sequence still gets its reward
  const Result rm = run(masked), ra = run(alone);
  EXPECT_NEAR(rm.loss_sum, ra.loss_sum, 1e-6);
  Result ra6 = ra;  // compare gradients only (rewards differ in count)
  ra6.rewards = {rm.rewards[0], rm.rewards[1], rm.rewards[2], rm.rewards[3], rm.rewards[4], rm.rewards[5]};
  expect_close(rm, ra6, 1e-6);
}

TEST_F(Layouts, ForwardOnlyMatchesForwardBackward) {
  const data::PairBatch b = testing::padded_batch(fb_.seqs, 0, fb_.row_len);
  Qwen3RewardModel m(config_);
  RecordingAccess acc(*params_);
  const RewardOutput f = m.forward(b, acc);
  EXPECT_EQ(acc.log, (std::vector<std::string>{"a0", "r0", "a1", "r1", "a2", "r2", "a3", "r3"}));
  const Result fb = run(b);
  EXPECT_EQ(f.rewards, fb.rewards);
  EXPECT_EQ(f.pairs.loss_sum, fb.loss_sum);
  EXPECT_EQ(f.pairs.correct_pairs, 2);
}

TEST_F(Layouts, BadBatchesAreInputErrors) {
  Qwen3RewardModel m(config_);
  data::PairBatch b = testing::padded_batch(fb_.seqs, 0, fb_.row_len);
  b.tokens[3] = 997;  // vocab is 997
  try {
    m.forward(b, *params_);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("token id 997"), std::string::npos) << e.what();
  }
  b = testing::padded_batch(fb_.seqs, 0, fb_.row_len);
  b.last_index[2] += 1;  // one past the sequence's last token
  EXPECT_THROW(m.forward(b, *params_), InputError);
  b = testing::padded_batch(fb_.seqs, 0, fb_.row_len);
  b.cu_seqlens[3] += 1;  // disagrees with seq_len[2] and seq_len[3]
  try {
    m.forward(b, *params_);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cu_seqlens[3] - cu_seqlens[2]"), std::string::npos) << e.what();
  }
  b.cu_seqlens.pop_back();
  EXPECT_THROW(m.forward(b, *params_), InputError);
}

TEST_F(Layouts, TokenPlanPacksRealTokensOnce) {
  const data::PairBatch b = testing::packed_batch(fb_.seqs, 0, 40, {5, 3, 1, 4, 0, 2});
  const TokenPlan p = make_token_plan(b, config_.vocab_size);
  EXPECT_EQ(p.cu_seqlens, b.cu_seqlens);
  ASSERT_EQ(p.num_seqs(), 6);
  EXPECT_EQ(p.num_tokens(), 63);
  EXPECT_EQ(p.max_seqlen, 17);
  EXPECT_EQ(p.padded_tokens, 64);
  EXPECT_EQ(p.padded_tokens % kTokenRowMultiple, 0);
  for (int64_t s = 0; s < 6; ++s) {
    EXPECT_EQ(p.pooled[s], p.cu_seqlens[s + 1] - 1) << s;  // the fixture pools each sequence's last token
    for (int32_t t = p.cu_seqlens[s]; t < p.cu_seqlens[s + 1]; ++t) {
      EXPECT_EQ(p.tokens[t], fb_.seqs[s][t - p.cu_seqlens[s]]);
      EXPECT_EQ(p.positions[t], t - p.cu_seqlens[s]);
    }
  }
}

// The scores attention computes, against a count of the pairs the mask leaves visible, and by hand: 15 for a
// plain 5-token sequence, 28 - 2 x 2 for a 7-token one whose queries 5 and 6 do not see keys 3 and 4, 1.
TEST(TokenPlanScores, CountsWhatTheMaskLeavesVisible) {
  TokenPlan p;
  p.cu_seqlens = {0, 5, 12, 13};
  p.hidden = {0, 0, 3, 5, 0, 0};
  double visible = 0;
  for (int64_t a = 0; a < p.num_attention_seqs(); ++a) {
    const int64_t L = p.cu_seqlens[a + 1] - p.cu_seqlens[a];
    for (int64_t q = 0; q < L; ++q)
      for (int64_t k = 0; k < L; ++k) visible += math::attention_masked(q, k, p.hidden[2 * a], p.hidden[2 * a + 1]) ? 0 : 1;
  }
  EXPECT_EQ(visible, 40);
  EXPECT_EQ(attention_scores(p), 40);
  p.hidden.clear();  // no pair of the batch shares: plain causal
  EXPECT_EQ(attention_scores(p), 15 + 28 + 1);
}

// The init stream against an independent reference (splitmix64 + Box-Muller written out in Python: pair j
// from the state seed + 2j * 0x9E3779B97F4A7C15), at its start and deep inside, where a threaded fill
// enters the stream in the middle; and threads change no bit.
TEST(RandomInit, NormalStreamMatchesTheReferenceOnAnyThreadCount) {
  const size_t n = 3 * (size_t(1) << 21) + 5;  // odd, several pieces of the threaded fill
  std::vector<float> one(n), four(n);
  fill_normal(one, 0.0, 1.0, 42, 1);
  fill_normal(four, 0.0, 1.0, 42, 4);
  EXPECT_EQ(std::memcmp(one.data(), four.data(), n * sizeof(float)), 0);
  const std::pair<size_t, float> want[] = {{0, 0.41471976041793823f},        {1, 0.6526812314987183f},
                                           {5000000, -0.8455151915550232f},  {5000001, -0.08592266589403152f},
                                           {6291456, -0.33124056458473206f}, {6291457, -0.3088076412677765f}};
  for (const auto& [i, v] : want) {
    EXPECT_FLOAT_EQ(one[i], v) << i;
    EXPECT_FLOAT_EQ(four[i], v) << i;
  }
}

// A fresh model from random init: deterministic, HF-like, and trainable end to end on a tiny config.
TEST(RandomInit, DeterministicAndHfLike) {
  const Qwen3Config c = tiny_qwen3_config();
  DenseParams a(qwen3_rm_groups(c)), b(qwen3_rm_groups(c));
  init_random(a, c, 7);
  init_random(b, c, 7);
  for (const GroupSpec& g : a.groups())
    for (const TensorSpec& t : g.tensors) {
      auto pa = a.param(t.name), pb = b.param(t.name);
      ASSERT_TRUE(std::equal(pa.begin(), pa.end(), pb.begin())) << t.name;
    }
  for (float v : a.param("model.layers.1.post_attention_layernorm.weight")) EXPECT_EQ(v, 1.0f);
  for (int64_t k = 0; k < c.hidden_size; ++k) EXPECT_EQ(a.param("model.embed_tokens.weight")[k], 0.0f);  // pad row
  double sq = 0;
  auto q = a.param("model.layers.0.self_attn.q_proj.weight");
  for (float v : q) sq += double(v) * v;
  EXPECT_NEAR(std::sqrt(sq / double(q.size())), 0.02, 0.001);
  DenseParams other(qwen3_rm_groups(c));
  init_random(other, c, 8);
  EXPECT_NE(other.param("score.weight")[0], a.param("score.weight")[0]);

  // Loss decreases under plain SGD on a random batch (backward is a descent direction).
  std::vector<std::vector<int32_t>> seqs;
  for (int s = 0; s < 4; ++s) {
    std::vector<int32_t> ids;
    for (int j = 0; j < 20 + 7 * s; ++j) ids.push_back(1 + (s * 131 + j * 17) % 500);
    seqs.push_back(ids);
  }
  const data::PairBatch batch = testing::packed_batch(seqs, 0, 64, {0, 1, 2, 3});
  Qwen3RewardModel m(c);
  const double l0 = m.forward_backward(batch, a).pairs.loss_sum;
  for (int g = 0; g < a.num_groups(); ++g)
    for (size_t t = 0; t < a.groups()[g].tensors.size(); ++t) {
      auto p = a.param(g, int(t));
      auto gr = a.grad(g, int(t));
      for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * gr[i];
    }
  const double l1 = m.forward(batch, a).pairs.loss_sum;
  EXPECT_LT(l1, l0);
}

}  // namespace
}  // namespace zero::model
