#include "pmtrain/score_passes.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"
#include "data/sampler.h"

namespace zero::pmtrain {

ScorePasses::ScorePasses(EvalBatch per_pass) : per_pass_(per_pass) {
  ZERO_REQUIRE((per_pass.pairs > 0) != (per_pass.tokens > 0), ConfigError,
               "score: a forward pass is a number of pairs or a token budget, not {} pairs and {} tokens",
               per_pass.pairs, per_pass.tokens);
}

void ScorePasses::add(int64_t tokens) {
  costs_.push_back(tokens);
  tokens_ += tokens;
}

std::vector<std::vector<int64_t>> ScorePasses::take(bool all) {
  // Called after every input line: nothing is built unless a pass is ready.
  std::vector<std::vector<int64_t>> passes;
  const int64_t waiting = int64_t(costs_.size());
  if (per_pass_.pairs > 0) {
    const int64_t n = all ? waiting : waiting / per_pass_.pairs * per_pass_.pairs;
    for (int64_t first = 0; first < n; first += per_pass_.pairs) {
      passes.emplace_back(size_t(std::min(per_pass_.pairs, n - first)));
      std::iota(passes.back().begin(), passes.back().end(), first);
    }
  } else if (waiting > 0 && (all || tokens_ >= per_pass_.tokens)) {
    std::vector<int64_t> ids(costs_.size());
    std::iota(ids.begin(), ids.end(), int64_t(0));
    std::vector<data::StepPlan> plan(1);
    data::cut_by_tokens(ids, costs_, per_pass_.tokens, plan);
    for (data::MicroBatchPlan& m : plan[0].micro) passes.push_back(std::move(m.pair_ids));
    // The last pass waits for what follows, unless it is the only one (then the waiting tokens reached the
    // budget in it: exactly full, or one pair over the budget, alone in any cut).
    if (!all && passes.size() > 1) passes.pop_back();
  }
  size_t taken = 0;
  for (const auto& p : passes) taken += p.size();
  tokens_ -= std::accumulate(costs_.begin(), costs_.begin() + ptrdiff_t(taken), int64_t(0));
  costs_.erase(costs_.begin(), costs_.begin() + ptrdiff_t(taken));
  return passes;
}

}  // namespace zero::pmtrain
