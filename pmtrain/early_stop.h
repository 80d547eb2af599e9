// run.early_stop: patience over the evaluations of run.keep_best's metric, as HF's EarlyStoppingCallback
// counts it: an evaluation that is not strictly better than the best so far counts against the patience,
// a better one resets it; the run stops once `patience` evaluations in a row did not improve. The state
// goes into every checkpoint (trainer.extra.early_stop), so a resumed run counts on where it stopped.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace zero::pmtrain {

struct EarlyStop {
  int64_t patience = 0;  // 0 = off
  bool higher_is_better = false;
  std::string metric;    // what the values are (the keep_best pointer): a count of another metric is not resumed
  std::optional<double> best;
  int64_t evals_since_best = 0;

  // Records one evaluation's value; true when the patience is used up.
  bool record(double value);
  bool exhausted() const { return patience > 0 && evals_since_best >= patience; }
  nlohmann::json to_json() const;
  // From to_json(); keeps this patience (the config's). False, and nothing restored, when the saved count
  // is of another metric than this one (run.keep_best or keep_best_set changed): the count starts afresh.
  bool restore(const nlohmann::json& j);
};

}  // namespace zero::pmtrain
