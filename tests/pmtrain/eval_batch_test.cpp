// pmtrain/planner.h's evaluation batch and the largest training micro-batch, against what the CPU backend
// really allocates (ModelOps' own byte counter at its peak): a forward pass of the derived number of pairs,
// every sequence at data.max_len, fits in the activation memory a training micro-batch at data.max_len
// takes, and one pair more does not; a token budget's micro-batch of short pairs fits the plan.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "model/cpu/cpu_model_ops.h"
#include "model/init.h"
#include "model/reward_model.h"
#include "pmtrain/planner.h"
#include "tests/model/model_test_util.h"

namespace zero::pmtrain {
namespace {

using model::ActivationCheckpointing;

// The peak activation bytes of one pass over `pairs` pairs of the given lengths (chosen, rejected each),
// with or without backward.
size_t measured_peak(const model::Qwen3Config& qc, ActivationCheckpointing ckpt, const std::vector<int64_t>& lens,
                     bool backward) {
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t len : lens) {
    std::vector<int32_t> s(static_cast<size_t>(len), 0);
    for (auto& t : s) t = int32_t(1 + rng() % uint32_t(qc.vocab_size - 1));
    seqs.push_back(s);
  }
  auto owned = model::make_cpu_model_ops();
  const model::ModelOps* ops = owned.get();
  model::RewardModelOptions o;
  o.activation_checkpointing = ckpt;
  const model::Qwen3RewardModel m(qc, o, std::move(owned));
  model::DenseParams p(model::qwen3_rm_groups(qc));
  model::init_random(p, qc, 3);
  const data::PairBatch batch = model::testing::padded_batch(seqs, 0);
  if (backward)
    m.forward_backward(batch, p);
  else
    m.forward(batch, p);
  return ops->peak_bytes();
}

// The tiny model at 6 layers: a step keeps a layer's input per layer (full checkpointing) or all of its
// activations, a forward one layer's at a time.
model::Qwen3Config six_layers() {
  model::Qwen3Config qc = model::tiny_qwen3_config();
  qc.num_layers = 6;
  return qc;
}

Config tiny_config(ActivationCheckpointing ckpt) {
  Config cfg;
  cfg.source = "eval.yaml";
  cfg.data.max_len = 24;
  cfg.model.activation_checkpointing = ckpt;
  return cfg;
}

TEST(EvalBatch, TheMostPairsWhoseForwardFitsTheStepsMeasuredActivations) {
  const model::Qwen3Config qc = six_layers();
  for (ActivationCheckpointing ckpt :
       {ActivationCheckpointing::None, ActivationCheckpointing::Selective, ActivationCheckpointing::Full}) {
    const Config cfg = tiny_config(ckpt);
    const int64_t micro = 2, L = cfg.data.max_len;
    const int64_t k = eval_batch(cfg, qc, PlanDevice::Cpu, micro).pairs;
    const size_t step = measured_peak(qc, ckpt, std::vector<int64_t>(size_t(2 * micro), L), true);
    EXPECT_LE(measured_peak(qc, ckpt, std::vector<int64_t>(size_t(2 * k), L), false), step) << int(ckpt);
    EXPECT_GT(measured_peak(qc, ckpt, std::vector<int64_t>(size_t(2 * k + 2), L), false), step) << int(ckpt);
    // A forward keeps nothing for a backward: more pairs than a training micro-batch, unless the step keeps
    // little beside one layer (full checkpointing of a few layers as thin as these).
    EXPECT_GE(k, micro) << int(ckpt);
    if (ckpt != ActivationCheckpointing::Full) {
      EXPECT_GT(k, micro) << int(ckpt);
    }
    printf("  checkpointing %d: training micro-batch %lld pairs, evaluation batch %lld pairs\n", int(ckpt),
           (long long)micro, (long long)k);
  }
  // The layer count does not change a forward's peak but multiplies a step's kept activations.
  model::Qwen3Config deep = qc;
  deep.num_layers = 3 * qc.num_layers;
  const Config none = tiny_config(ActivationCheckpointing::None);
  EXPECT_GT(eval_batch(none, deep, PlanDevice::Cpu, 2).pairs, eval_batch(none, qc, PlanDevice::Cpu, 2).pairs);
}

TEST(EvalBatch, AValueSetIsKeptOrRefusedWithTheMostThatFits) {
  const model::Qwen3Config qc = six_layers();
  Config cfg = tiny_config(ActivationCheckpointing::Full);
  const int64_t most = eval_batch(cfg, qc, PlanDevice::Cpu, 2).pairs;
  cfg.batch.eval_micro = most;
  EXPECT_EQ(eval_batch(cfg, qc, PlanDevice::Cpu, 2).pairs, most);
  cfg.batch.eval_micro = 1;
  EXPECT_EQ(eval_batch(cfg, qc, PlanDevice::Cpu, 2).pairs, 1);
  cfg.batch.eval_micro = most + 1;
  try {
    eval_batch(cfg, qc, PlanDevice::Cpu, 2);
    ADD_FAILURE() << "batch.eval_micro above the most that fits was taken";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("eval.yaml: batch.eval_micro " + std::to_string(most + 1)), std::string::npos) << what;
    EXPECT_NE(what.find("at most " + std::to_string(most) + " fit"), std::string::npos) << what;
  }
  cfg.batch.eval_micro = 0;
  cfg.batch.eval_micro_tokens = 100;  // the key of token budgets, with batches of pairs
  EXPECT_THROW(eval_batch(cfg, qc, PlanDevice::Cpu, 2), ConfigError);
  cfg.batch.micro_tokens = 200;
  EXPECT_EQ(eval_batch(cfg, qc, PlanDevice::Cpu, 0).tokens, 100);
  cfg.batch.eval_micro = 4;  // and the other way round
  EXPECT_THROW(eval_batch(cfg, qc, PlanDevice::Cpu, 0), ConfigError);
}

// A token budget's micro-batch holds the budget's tokens, not only whole max_len pairs: 100 tokens of short
// pairs under data.max_len 24 (two max_len pairs take 96). The plan must hold what such a batch allocates.
TEST(EvalBatch, TheStepsPlanHoldsATokenBudgetOfShortPairs) {
  const model::Qwen3Config qc = six_layers();
  for (ActivationCheckpointing ckpt : {ActivationCheckpointing::None, ActivationCheckpointing::Full}) {
    Config cfg = tiny_config(ckpt);
    cfg.batch.micro_tokens = 100;
    const std::vector<int64_t> short_pairs(20, 5);  // 10 pairs of 5 + 5 tokens
    EXPECT_EQ(largest_micro_batch(cfg, 1).tokens, 100);
    EXPECT_LE(measured_peak(qc, ckpt, short_pairs, true), step_activation_bytes(cfg, qc, PlanDevice::Cpu, 1)) << int(ckpt);
    // Its evaluation batches by tokens: a forward of that many tokens fits the step's plan.
    const int64_t t = eval_batch(cfg, qc, PlanDevice::Cpu, 1).tokens;
    EXPECT_GE(t, 100);
    EXPECT_LE(measured_peak(qc, ckpt, std::vector<int64_t>(size_t(t / 10 * 2), 5), false),
              step_activation_bytes(cfg, qc, PlanDevice::Cpu, 1))
        << int(ckpt);
  }
}

}  // namespace
}  // namespace zero::pmtrain
