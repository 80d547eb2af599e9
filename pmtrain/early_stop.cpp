#include "pmtrain/early_stop.h"

#include <nlohmann/json.hpp>

namespace zero::pmtrain {

bool EarlyStop::record(double value) {
  if (!best || (higher_is_better ? value > *best : value < *best)) {
    best = value;
    evals_since_best = 0;
  } else {
    ++evals_since_best;
  }
  return exhausted();
}

nlohmann::json EarlyStop::to_json() const {
  return {{"best", best ? nlohmann::json(*best) : nlohmann::json(nullptr)},
          {"evals_since_best", evals_since_best},
          {"metric", metric}};
}

bool EarlyStop::restore(const nlohmann::json& j) {
  if (!j.is_object()) return true;
  // Counts saved before the metric was recorded were of the whole split's (the only choice then).
  const std::string saved = j.value("metric", metric.starts_with("/eval/sets/") ? std::string("(whole split)") : metric);
  if (saved != metric) return false;
  best = j.contains("best") && j["best"].is_number() ? std::optional<double>(j["best"].get<double>()) : std::nullopt;
  evals_since_best = j.value("evals_since_best", int64_t(0));
  return true;
}

}  // namespace zero::pmtrain
