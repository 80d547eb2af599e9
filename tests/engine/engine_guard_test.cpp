// The NaN/inf guard (NaN and +-inf skip the step, the lowest offending rank and its group are named,
// the optimizer step and the LR schedule do not advance, training goes on), padding for groups
// smaller than the world size, and clear errors for bad configuration.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "tests/engine/engine_harness.h"

using namespace zero;
using namespace zero::testing;

namespace {
// Writes `value` (NaN, inf) into the first gradient element of group `group` when active.
class PoisoningParams final : public example::MlpParams {
 public:
  PoisoningParams(Engine& e, int group, bool active, float value = std::nanf(""))
      : inner_(e), group_(group), active_(active), value_(value) {}
  std::vector<std::vector<float>> load(int g) override { return inner_.load(g); }
  void done(int g) override { inner_.done(g); }
  void begin_backward() override { inner_.begin_backward(); }
  void store_grad(int g, const std::vector<std::vector<float>>& grads) override {
    auto copy = grads;
    if (active_ && g == group_) copy[0][0] = value_;
    inner_.store_grad(g, copy);
  }

 private:
  example::EngineMlpParams inner_;
  int group_;
  bool active_;
  float value_;
};

// One optimizer step of two micro-steps of 2 samples per rank. With poison_group >= 0, this rank writes
// `value` into that group's gradient in the second micro-step.
StepResult one_step(Harness& h, const example::MlpDataset& data, int poison_group = -1, float value = std::nanf("")) {
  for (int i = 0; i < 2; ++i) {
    PoisoningParams p(*h.engine, poison_group, poison_group >= 0 && i == 1, value);
    h.engine->begin_micro_step();
    h.model.forward_backward(p, data.x.data(), data.t.data(), 2);
  }
  return h.engine->step(4.0 * h.world());
}
}  // namespace

TEST(EngineGuard, NonFiniteGradientSkipsStepNamesGroupAndRankAndTrainingGoesOn) {
  for (int stage = 0; stage <= 3; ++stage) {
    Harness h(base_config(stage, 2));
    const int W = h.world(), bad_rank = W - 1, bad_group = 2;
    example::MlpDataset data(64, h.model.input_dim(), 5);
    const std::vector<float> before = example::full_parameters(*h.engine);
    // Step 1: poisoned on the last rank only.
    StepResult r = one_step(h, data, h.rank() == bad_rank ? bad_group : -1);
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

TEST(EngineGuard, InfinityIsCaughtLikeNaN) {
  for (int stage = 0; stage <= 3; ++stage)
    for (float inf : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
      Harness h(base_config(stage, 2));
      example::MlpDataset data(64, h.model.input_dim(), 5);
      const std::vector<float> before = example::full_parameters(*h.engine);
      const StepResult r = one_step(h, data, h.rank() == h.world() - 1 ? 1 : -1, inf);
      EXPECT_FALSE(r.applied) << "stage " << stage << " value " << inf;
      EXPECT_EQ(r.bad_rank, h.world() - 1);
      EXPECT_EQ(r.bad_group, h.model.groups()[1].name);
      EXPECT_EQ(rel_diff(example::full_parameters(*h.engine), before), 0.0) << "a skipped step changed parameters";
    }
}

TEST(EngineGuard, WithTwoBadRanksTheLowestAndItsGroupAreNamed) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 2) GTEST_SKIP() << "needs two ranks";
  for (int stage = 0; stage <= 3; ++stage) {
    Harness h(base_config(stage, 2));
    const int W = h.world();
    example::MlpDataset data(64, h.model.input_dim(), 5);
    // The higher rank's group comes first, so naming the lowest group (not the lowest rank) fails.
    const int bad_group = h.rank() == W - 1 ? 0 : h.rank() == W - 2 ? 2 : -1;
    const StepResult r = one_step(h, data, bad_group);
    EXPECT_FALSE(r.applied) << "stage " << stage;
    EXPECT_EQ(r.bad_rank, W - 2) << "stage " << stage;
    EXPECT_EQ(r.bad_group, h.model.groups()[2].name) << "stage " << stage;
  }
}

TEST(EngineGuard, TheFirstBadTensorIsNamedPastAnEmptyTensor) {
  // Group 'g0' holds w0, an empty tensor, then w1 (the empty one is a run of no elements in the view's count);
  // group 'g1' holds b. The last rank plants NaN at element `at` of one tensor; the step names that tensor.
  const std::vector<GroupInfo> groups = {{"g0", {{"w0", 37}, {"none", 0}, {"w1", 23}}}, {"g1", {{"b", 5}}}};
  struct Plant {
    int group, tensor;
    size_t at;
    const char* name;
  };
  for (const Plant p : {Plant{0, 2, 22, "w1"}, Plant{0, 2, 0, "w1"}, Plant{0, 0, 36, "w0"}, Plant{1, 0, 4, "b"}})
    for (int stage = 0; stage <= 3; ++stage) {
      auto comm = make_test_comm(MPI_COMM_WORLD);
      auto ops = make_test_ops();
      TrackingAllocator alloc{make_host_allocator()};
      Engine e(base_config(stage, 1), groups, *comm, *ops, alloc);
      e.init_params([&](int g, int t, float* dst) { std::fill_n(dst, groups[g].tensors[t].numel, 0.25f); });
      const int W = comm->world();
      e.begin_micro_step();
      for (int g = 0; g < 2; ++g) e.gather(g), e.release(g);
      e.begin_backward();
      for (int g = 1; g >= 0; --g) {
        e.gather(g);
        const GroupView& view = e.grad_view(g);
        for (size_t t = 0; t < view.size(); ++t) {
          std::vector<float> v(view[t].numel, 0.5f);
          if (comm->rank() == W - 1 && g == p.group && int(t) == p.tensor) v[p.at] = std::nanf("");
          ops->copy_from_host(view[t].data, view[t].dtype, v.data(), v.size());
        }
        e.grad_ready(g);
        e.release(g);
      }
      const StepResult r = e.step(double(W));
      const std::string what = fmt::format("stage {}, NaN at {} of {}", stage, p.at, p.name);
      EXPECT_FALSE(r.applied) << what;
      EXPECT_EQ(r.bad_rank, W - 1) << what;
      EXPECT_EQ(r.bad_group, groups[p.group].name) << what;
      EXPECT_EQ(r.bad_tensor, p.name) << what;
    }
}

TEST(EngineGuard, ASkippedStepDoesNotAdvanceTheLrSchedule) {
  // base_config's schedule: cosine, peak 1e-2, warmup 2 of 12 steps, so step 1 runs at 5e-3 and step 2
  // at the peak 1e-2. A skipped step reports (and leaves) the lr of the step still to come.
  for (int stage = 0; stage <= 3; ++stage) {
    Harness h(base_config(stage, 2));
    example::MlpDataset data(64, h.model.input_dim(), 5);
    const StepResult skipped = one_step(h, data, h.rank() == 0 ? 0 : -1);
    ASSERT_FALSE(skipped.applied);
    EXPECT_FLOAT_EQ(skipped.lr, 5e-3f) << "stage " << stage;
    const StepResult first = one_step(h, data);
    ASSERT_TRUE(first.applied);
    EXPECT_EQ(first.step, 1);
    EXPECT_FLOAT_EQ(first.lr, 5e-3f) << "stage " << stage << ": the skipped step advanced the schedule";
    const StepResult second = one_step(h, data);
    EXPECT_EQ(second.step, 2);
    EXPECT_FLOAT_EQ(second.lr, 1e-2f) << "stage " << stage;
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
