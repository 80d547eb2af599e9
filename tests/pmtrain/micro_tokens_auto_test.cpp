// batch.micro_tokens: auto (pmtrain/planner.h resolve_micro_tokens): the most tokens a micro-batch may hold whose
// plan uses at most kAutoMemoryUse of what the device offers, a multiple of 64, between one pair at data.max_len
// and the rank's whole share of a step at max_len; chosen after activation_checkpointing auto
// (resolve_auto_choices). The devices below write each budget's bytes out, so every answer is worked by hand.
#include <gtest/gtest.h>

#include "pmtrain/config.h"
#include "pmtrain/planner.h"
#include "tests/pmtrain/gpu_plan_use.h"

namespace zero::pmtrain {
namespace {

using model::ActivationCheckpointing;

// 16 pairs a step of two answers of at most 100 tokens: the least budget is 200 tokens.
Config auto_config(const std::string& more = "") {
  return parse_config("batch:\n  global: 16\n  micro_tokens: auto\ndata:\n  max_len: 100\n" + more, "t.yaml");
}

// A device offering `offered` bytes; a plan takes 1000 bytes and one a token of the budget. Counts the plans.
struct Device {
  double offered = 0;
  int asked = 0;
  double operator()(const Config& c) { return ++asked, (1000.0 + double(c.batch.micro_tokens)) / offered; }
};

int64_t budget(double offered, int world = 2, int* asked = nullptr) {
  Device d{offered, 0};
  const Config c = resolve_micro_tokens(auto_config(), world, [&](const Config& x) { return d(x); });
  EXPECT_TRUE(c.batch.micro_tokens_auto);  // still auto when written back
  if (asked) *asked = d.asked;
  return c.batch.micro_tokens;
}

TEST(MicroTokensAuto, TheMostTokensWithinTheHeadroom) {
  ASSERT_EQ(kAutoMemoryUse, 0.9);  // the literal cases below are worked out for it
  ASSERT_EQ(auto_config().batch.micro_tokens, 200);
  // 2000 bytes: at most 1800 used, so at most 800 tokens; 800 is not a multiple of 64: 768.
  int asked = 0;
  EXPECT_EQ(budget(2000, 2, &asked), 768);
  EXPECT_LE(asked, 1 + 11);  // the whole share first, then a binary search over (200, 1600]: not a walk
  EXPECT_EQ(budget(1400), 256);  // 260 tokens fit: 256
  EXPECT_EQ(budget(1360), 200);  // 224 fit, whose multiple of 64 (192) is under the least budget: 200
  // The rank's whole share of a step at max_len: 8 pairs of 200 tokens at 2 ranks (2600 of 10000 bytes).
  EXPECT_EQ(budget(10000), 1600);
  EXPECT_EQ(budget(10000, 3), 1200);  // ceil(16 / 3) = 6 pairs
  EXPECT_EQ(budget(10000, 32), 200);  // fewer pairs than ranks: still one pair
  // Nothing within the headroom (200 tokens take 1200 of 1250 bytes): the least budget, for require_fits to judge.
  EXPECT_EQ(budget(1250), 200);
}

TEST(MicroTokensAuto, ANumberIsLeftAlone) {
  Config given = parse_config("batch:\n  global: 16\n  micro_tokens: 700\n", "t.yaml");
  int asked = 0;
  const Config c = resolve_micro_tokens(given, 2, [&](const Config&) { return ++asked, 0.1; });
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(c.batch.micro_tokens, 700);
  EXPECT_FALSE(c.batch.micro_tokens_auto);
}

// Both auto: the checkpointing is chosen at the least budget (the least recompute that fits there), then the
// budget at that checkpointing. No checkpointing takes 1000 bytes and 2 a token, full 500 and 1: on 2000 bytes none
// fits at 200 tokens (1400), and then holds 400 tokens (1800): 384. Full would have held 1300.
TEST(MicroTokensAuto, ChosenAfterTheCheckpointing) {
  const Config cfg = auto_config("model:\n  activation_checkpointing: auto\n");
  auto use = [](const Config& c) {
    const double t = double(c.batch.micro_tokens);
    return (c.model.activation_checkpointing == ActivationCheckpointing::None ? 1000.0 + 2.0 * t : 500.0 + t) / 2000.0;
  };
  const Config c = resolve_auto_choices(cfg, 28, 2, use);
  EXPECT_EQ(c.model.activation_checkpointing, ActivationCheckpointing::None);
  EXPECT_EQ(c.batch.micro_tokens, 384);
  EXPECT_TRUE(c.model.checkpointing_auto);
  EXPECT_TRUE(c.batch.micro_tokens_auto);
}

// On real plans: Qwen3-1.7B at 8 ranks of 80 GiB, stage 3, 128 pairs a step at max_len 2048: the budget auto
// chooses is within the headroom, 64 tokens more are not, and it holds more than one pair (the share is 16).
TEST(MicroTokensAuto, OnTheGpuPlanOfQwen3_1_7B) {
  Config cfg = parse_config(
      "backend: cuda\nmodel:\n  preset: qwen3-1.7b\n  vocab_size: 151936\n  activation_checkpointing: none\n"
      "data:\n  max_len: 2048\nbatch:\n  global: 128\n  micro_tokens: auto\nzero:\n  stage: 3\n  param_dtype: bf16\n",
      "t.yaml");
  const GpuPlanUse use(cfg, 8, 16);
  const Config c = resolve_micro_tokens(cfg, 8, use);
  ASSERT_GT(c.batch.micro_tokens, 2 * 4096);
  ASSERT_LT(c.batch.micro_tokens, 16 * 4096);
  EXPECT_EQ(c.batch.micro_tokens % 64, 0);
  EXPECT_LE(use(c), kAutoMemoryUse);
  Config more = c;
  more.batch.micro_tokens += 64;
  EXPECT_GT(use(more), kAutoMemoryUse);
}

}  // namespace
}  // namespace zero::pmtrain
