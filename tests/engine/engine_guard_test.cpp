// The NaN/inf guard (skip, name the group and the rank, go on), padding for groups smaller than the
// world size, and clear errors for bad configuration.
#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "tests/engine/engine_harness.h"

using namespace zero;
using namespace zero::testing;

namespace {
// Injects a NaN into one group's gradient on one rank at one optimizer step.
class PoisoningParams final : public example::MlpParams {
 public:
  PoisoningParams(Engine& e, int group, bool active) : inner_(e), group_(group), active_(active) {}
  std::vector<std::vector<float>> load(int g) override { return inner_.load(g); }
  void done(int g) override { inner_.done(g); }
  void begin_backward() override { inner_.begin_backward(); }
  void store_grad(int g, const std::vector<std::vector<float>>& grads) override {
    auto copy = grads;
    if (active_ && g == group_) copy[0][0] = std::nanf("");
    inner_.store_grad(g, copy);
  }

 private:
  example::EngineMlpParams inner_;
  int group_;
  bool active_;
};
}  // namespace

TEST(EngineGuard, NonFiniteGradientSkipsStepNamesGroupAndRankAndTrainingGoesOn) {
  for (int stage = 0; stage <= 3; ++stage) {
    Harness h(base_config(stage, 2));
    const int W = h.world(), bad_rank = W - 1, bad_group = 2;
    example::MlpDataset data(64, h.model.input_dim(), 5);
    const std::vector<float> before = example::full_parameters(*h.engine);
    // Step 1: poisoned on the last rank only.
    for (int i = 0; i < 2; ++i) {
      PoisoningParams p(*h.engine, bad_group, h.rank() == bad_rank && i == 1);
      h.engine->begin_micro_step();
      h.model.forward_backward(p, data.x.data(), data.t.data(), 2);
    }
    StepResult r = h.engine->step(4.0 * W);
    EXPECT_FALSE(r.applied) << "stage " << stage;
    EXPECT_EQ(r.bad_rank, bad_rank);
    EXPECT_EQ(r.bad_group, h.model.groups()[bad_group].name);
    EXPECT_EQ(r.step, 0);
    EXPECT_EQ(rel_diff(example::full_parameters(*h.engine), before), 0.0) << "a skipped step changed parameters";
    // Training goes on: clean steps apply, count from 1, and stay finite.
    auto logs = example::train_with_engine(h.model, *h.engine, data, 4 * W, 2, 3);
    for (const auto& l : logs) EXPECT_TRUE(l.result.applied);
    EXPECT_EQ(logs.back().result.step, 3);
    for (float v : example::full_parameters(*h.engine)) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(EngineGuard, GroupsSmallerThanTheWorldWorkThroughPadding) {
  // The 5-element scale group has fewer elements than ranks at world >= 6; the layout pads it and
  // the trained values still match the single-process reference.
  EngineConfig cfg = base_config(3, 1);
  Harness h(cfg);
  const int W = h.world();
  const auto& scale = h.engine->partition().groups[h.model.num_groups() - 2];
  EXPECT_EQ(scale.numel, 5u);
  EXPECT_EQ(scale.shard, 64u);  // one aligned block per rank
  EXPECT_EQ(scale.padded, 64u * W);
  example::MlpDataset data(64, h.model.input_dim(), 9);
  example::train_with_engine(h.model, *h.engine, data, 2 * W, 2, 4);
  const auto ref = example::train_reference(h.model, data, 2 * W, 4, cfg.adamw, cfg.schedule, cfg.clip_norm);
  EXPECT_LT(rel_diff(example::full_parameters(*h.engine), example::flatten(ref.params)), 1e-5);
}

TEST(EngineErrors, BadConfigurationIsAClearError) {
  auto expect_error = [](EngineConfig c, const std::string& needle) {
    try {
      Harness h(c);
      ADD_FAILURE() << "no error for: " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  EngineConfig c = base_config(0, 1);
  c.stage = 4;
  expect_error(c, "unknown stage 4");
  c = base_config(0, 1);
  c.bucket_elements = 0;
  expect_error(c, "bucket_elements must be positive");
  c = base_config(2, 1);
  c.reduce_dtype = DType::F16;
  expect_error(c, "reduce_dtype fp16 cannot be packed by the");
  c = base_config(2, 1);
  c.param_dtype = DType::F16;
  expect_error(c, "param_dtype fp16 is not supported");
}
