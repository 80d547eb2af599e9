// model.activation_checkpointing: auto (pmtrain/planner.h resolve_checkpointing): the least recompute whose plan
// uses at most kAutoMemoryUse of what the device offers, in the order none, selective, full with the most
// selective layers, full, full with its attention recomputed; the resolved config still says auto when written back.
#include <gtest/gtest.h>

#include <string>

#include "pmtrain/config.h"
#include "pmtrain/planner.h"
#include "tests/pmtrain/gpu_plan_use.h"

namespace zero::pmtrain {
namespace {

using model::ActivationCheckpointing;

Config auto_config() { return parse_config("model:\n  activation_checkpointing: auto\n", "t.yaml"); }

// A device offering `offered` bytes, each choice's bytes written out: none 200, full with n of the 28 layers
// selective 50 + 5 n, selective (= all 28) 190, full with its attention recomputed 45. Records how many plans
// were asked for.
struct Device {
  double offered = 0;
  int asked = 0;
  double operator()(const Config& c) {
    ++asked;
    const model::ActivationCheckpointing mode = c.model.activation_checkpointing;
    const double n = mode == ActivationCheckpointing::Selective ? 28.0 : double(c.model.selective_layers);
    if (c.model.recompute_attention) return (n == 0 ? 45.0 : 1e9) / offered;
    return (mode == ActivationCheckpointing::None ? 200.0 : 50.0 + 5.0 * n) / offered;
  }
};

Config resolved(double offered, int* asked = nullptr) {
  Device d{offered, 0};
  const Config c = resolve_checkpointing(auto_config(), 28, [&](const Config& x) { return d(x); });
  if (asked) *asked = d.asked;
  return c;
}

TEST(CheckpointingAuto, TheLeastRecomputeWithinTheHeadroom) {
  ASSERT_EQ(kAutoMemoryUse, 0.9);  // the literal cases below are worked out for it
  // 100 bytes: at most 90 used: full with 8 layers selective (exactly 90: at most, not below).
  Config c = resolved(100);
  EXPECT_EQ(c.model.activation_checkpointing, ActivationCheckpointing::Full);
  EXPECT_EQ(c.model.selective_layers, 8);
  EXPECT_FALSE(c.model.recompute_attention);
  EXPECT_TRUE(c.model.checkpointing_auto);
  EXPECT_EQ(checkpointing_text(c.model, 28), "auto: full, the last 8 of 28 layers selective");
  EXPECT_EQ(resolved(200).model.selective_layers, 26);  // 180 of 200
  EXPECT_EQ(resolved(211).model.selective_layers, 27);  // selective's 190 is 0.9005 of 211
  c = resolved(212);  // 190 of 212
  EXPECT_EQ(c.model.activation_checkpointing, ActivationCheckpointing::Selective);
  EXPECT_EQ(c.model.selective_layers, 0);
  EXPECT_EQ(resolved(223).model.activation_checkpointing, ActivationCheckpointing::None);  // 200 of 223
  c = resolved(60);  // full alone: 50 of 60
  EXPECT_EQ(c.model.activation_checkpointing, ActivationCheckpointing::Full);
  EXPECT_EQ(c.model.selective_layers, 0);
  EXPECT_FALSE(c.model.recompute_attention);
  EXPECT_EQ(checkpointing_text(c.model, 28), "auto: full");
  // Full alone is 50 of 55: past the headroom; with its attention recomputed, 45 of 55.
  int asked = 0;
  c = resolved(55, &asked);
  EXPECT_EQ(c.model.activation_checkpointing, ActivationCheckpointing::Full);
  EXPECT_EQ(c.model.selective_layers, 0);
  EXPECT_TRUE(c.model.recompute_attention);
  EXPECT_EQ(checkpointing_text(c.model, 28), "auto: full, attention recomputed");
  // A binary search over the layers, not a walk: none, selective, at most ceil(log2 28) = 5 more plans, full alone.
  EXPECT_LE(asked, 2 + 5 + 1);
  // Nothing within the headroom (45 of 48, which still fits the device): the least memory, for require_fits to judge.
  c = resolved(48);
  EXPECT_EQ(c.model.activation_checkpointing, ActivationCheckpointing::Full);
  EXPECT_TRUE(c.model.recompute_attention);
}

TEST(CheckpointingAuto, AChosenModeIsLeftAlone) {
  Config given = parse_config("model:\n  activation_checkpointing: selective\n", "t.yaml");
  int asked = 0;
  const Config c = resolve_checkpointing(given, 28, [&](const Config&) { return ++asked, 5.0; });
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(c.model.activation_checkpointing, ActivationCheckpointing::Selective);
  EXPECT_FALSE(c.model.checkpointing_auto);
  EXPECT_EQ(checkpointing_text(c.model, 28), "selective");
}

// Written back (config.resolved.yaml, which a resume reads) as auto with selective_layers 0, so the next start
// chooses again for its own GPUs; every choice gives the same numbers.
TEST(CheckpointingAuto, TheResolvedConfigStillSaysAuto) {
  const Config c = resolved(100);
  ASSERT_EQ(c.model.selective_layers, 8);
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("activation_checkpointing: auto\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("selective_layers: 0\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("recompute_attention: false\n"), std::string::npos) << yaml;
  EXPECT_TRUE(resolved(55).model.recompute_attention);
  EXPECT_NE(to_yaml(resolved(55)).find("recompute_attention: false\n"), std::string::npos);
  const Config again = parse_config(yaml, "again.yaml");
  EXPECT_TRUE(again.model.checkpointing_auto);
  EXPECT_EQ(again.model.selective_layers, 0);
  EXPECT_FALSE(again.model.recompute_attention);
}

// On real plans: the plan of auto's choice for Qwen3-4B at one 80 GiB GPU (stage 0, a pair per micro-batch of
// two 2048-token answers) is within the headroom, and one more selective layer is not.
TEST(CheckpointingAuto, OnTheGpuPlanOfQwen3_4B) {
  Config cfg = parse_config(
      "backend: cuda\nmodel:\n  preset: qwen3-4b\n  vocab_size: 151936\n  activation_checkpointing: auto\n"
      "data:\n  max_len: 2048\nbatch:\n  global: 128\n  micro: 1\nzero:\n  stage: 0\n  param_dtype: bf16\n",
      "t.yaml");
  const GpuPlanUse use(cfg, 1, 128);
  const Config c = resolve_checkpointing(cfg, use.qc.num_layers, use);
  ASSERT_EQ(c.model.activation_checkpointing, ActivationCheckpointing::Full);
  ASSERT_GT(c.model.selective_layers, 0);
  ASSERT_LT(c.model.selective_layers, use.qc.num_layers);
  EXPECT_LE(use(c), kAutoMemoryUse);
  Config more = c;
  more.model.selective_layers++;
  EXPECT_GT(use(more), kAutoMemoryUse);
}

}  // namespace
}  // namespace zero::pmtrain
