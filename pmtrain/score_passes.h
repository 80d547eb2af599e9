// `pmtrain score`'s forward passes over pairs that arrive one at a time, in input order (rows leave in input
// order, so a pass takes consecutive pairs). Batches of pairs: a pass once `pairs` pairs wait. A token budget:
// once the waiting pairs' tokens reach it, the passes data::cut_by_tokens makes of them for one rank, all but
// the last, which waits for the pairs after it. The greedy cut agrees with itself on every pass but the last
// of any prefix, so the passes are those of cutting the whole input at once: each as full as the budget lets
// it be, none cut short by where a flush fell.
#pragma once
#include <cstdint>
#include <vector>

#include "pmtrain/planner.h"

namespace zero::pmtrain {

class ScorePasses {
 public:
  explicit ScorePasses(EvalBatch per_pass);
  // The next pair, costing `tokens` (data::pair_token_cost: what it takes in a pass).
  void add(int64_t tokens);
  // The passes to run now, as indices into the waiting pairs (0 the oldest); those pairs stop waiting, and
  // the passes together are a prefix of them. `all` (the input's end, or a failure after good lines): every
  // waiting pair.
  std::vector<std::vector<int64_t>> take(bool all);
  int64_t waiting() const { return int64_t(costs_.size()); }

 private:
  EvalBatch per_pass_;
  std::vector<int64_t> costs_;  // the waiting pairs', oldest first
  int64_t tokens_ = 0;          // their sum
};

}  // namespace zero::pmtrain
