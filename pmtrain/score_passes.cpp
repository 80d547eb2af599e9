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
  std::vector<std::vector<int64_t>> passes;
  if (costs_.empty()) return passes;
  std::vector<int64_t> ids(costs_.size());
  std::iota(ids.begin(), ids.end(), int64_t(0));
  if (per_pass_.pairs > 0) {
    const size_t full = ids.size() / size_t(per_pass_.pairs) * size_t(per_pass_.pairs);
    const size_t n = all ? ids.size() : full;
    for (size_t first = 0; first < n; first += size_t(per_pass_.pairs))
      passes.emplace_back(ids.begin() + first, ids.begin() + std::min(n, first + size_t(per_pass_.pairs)));
  } else {
    if (!all && tokens_ < per_pass_.tokens) return passes;
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
