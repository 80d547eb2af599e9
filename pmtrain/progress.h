// A long job's progress lines (an evaluation, a score, an export: run.eval_progress_s, `pmtrain export
// --progress-s`): at most one every `every_s` seconds, with the pace so far and the ETA it implies. It prints
// nothing itself: each caller's line says what its own units are.
#pragma once
#include <chrono>
#include <string>

namespace zero::pmtrain {

class Progress {
 public:
  explicit Progress(double every_s);  // every_s <= 0: never due
  // True once every_s has passed since the start or the last time it was true (and the next wait begins).
  bool due();
  double elapsed_s() const;
  // The time the rest takes at the pace so far, given the fraction done (format_duration's), or "unknown" at 0.
  std::string eta(double fraction_done) const;

 private:
  double every_s_;
  double next_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace zero::pmtrain
