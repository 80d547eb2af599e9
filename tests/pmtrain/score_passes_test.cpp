// pmtrain score's forward passes (pmtrain/score_passes.h) as pairs arrive one at a time: hand-worked passes
// for a token budget and a pair count, and on random costs the passes of cutting the whole input at once.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "core/check.h"
#include "data/sampler.h"
#include "pmtrain/score_passes.h"

namespace zero::pmtrain {
namespace {

using Passes = std::vector<std::vector<int64_t>>;

// Feeds `costs` one pair at a time, taking what is ready after each (take(true) at the end); the passes
// with indices into the whole input.
Passes stream(EvalBatch per_pass, const std::vector<int64_t>& costs) {
  ScorePasses sp(per_pass);
  Passes out;
  int64_t base = 0;  // the input index of the oldest waiting pair
  auto take = [&](bool all) {
    for (std::vector<int64_t> pass : sp.take(all)) {
      for (int64_t& id : pass) id += base;
      out.push_back(pass);
    }
  };
  for (size_t i = 0; i < costs.size(); ++i) {
    sp.add(costs[i]);
    base = int64_t(i) + 1 - sp.waiting();
    take(false);
  }
  base = int64_t(costs.size()) - sp.waiting();
  take(true);
  return out;
}

TEST(ScorePasses, TokenBudgetPassesAreFull) {
  // Six pairs of 300 tokens, at most 700 a pass: two pairs a pass, three passes. A flush at each crossing of
  // the budget would run [0 1] [2], then [3 4] [5]: four.
  EXPECT_EQ(stream({0, 700}, {300, 300, 300, 300, 300, 300}), (Passes{{0, 1}, {2, 3}, {4, 5}}));
  // A pair over the budget goes alone; a pass that fills the budget exactly runs at once.
  EXPECT_EQ(stream({0, 700}, {100, 900, 700, 350, 350, 10}), (Passes{{0}, {1}, {2}, {3, 4}, {5}}));
  // Nothing reaches the budget: one pass at the end.
  EXPECT_EQ(stream({0, 700}, {100, 200, 300}), (Passes{{0, 1, 2}}));
}

TEST(ScorePasses, PairCount) {
  EXPECT_EQ(stream({3, 0}, {5, 5, 5, 5, 5, 5, 5}), (Passes{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_EQ(stream({3, 0}, {}), Passes{});
}

TEST(ScorePasses, SameAsCuttingTheWholeInput) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t budget = 50 + int64_t(rng() % 400);
    std::vector<int64_t> costs(size_t(1 + rng() % 60));
    for (int64_t& c : costs) c = 1 + int64_t(rng() % 300);
    std::vector<int64_t> ids(costs.size());
    std::iota(ids.begin(), ids.end(), int64_t(0));
    std::vector<data::StepPlan> whole(1);
    data::cut_by_tokens(ids, costs, budget, whole);
    Passes want;
    for (const data::MicroBatchPlan& m : whole[0].micro) want.push_back(m.pair_ids);
    ASSERT_EQ(stream({0, budget}, costs), want) << "trial " << trial << ", budget " << budget;
  }
}

TEST(ScorePasses, RefusesNeitherOrBoth) {
  EXPECT_THROW(ScorePasses({0, 0}), ConfigError);
  EXPECT_THROW(ScorePasses({2, 100}), ConfigError);
}

}  // namespace
}  // namespace zero::pmtrain
