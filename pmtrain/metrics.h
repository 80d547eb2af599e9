// Run metrics: a JSONL file (<run>/metrics.jsonl, one object per line) and rank 0's progress line
// `step n/N | loss | acc | grad-norm | lr | tokens/s | mem | ETA`. Only rank 0 writes.
#pragma once
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/step_clock.h"
#include "model/model_ops.h"
#include "pmtrain/tensorboard.h"

namespace zero::pmtrain {

// Sums over pairs, reduced across ranks before printing.
struct PairStats {
  double loss_sum = 0, chosen_sum = 0, rejected_sum = 0;
  double pairs = 0, correct = 0, tokens = 0;
  double answer_tokens = 0;  // the answers' tokens whole (shared prompts counted in both; data/batch.h)
  // The model's pair metrics (ModelOps::take_pair_stats) over `tokens` computed tokens of batches whose
  // answers hold `answer_tokens`.
  static PairStats of(const model::PairStats& s, int64_t tokens, int64_t answer_tokens) {
    return {s.loss_sum,          s.chosen_reward_sum,        s.rejected_reward_sum, double(s.real_pairs),
            double(s.correct_pairs), double(tokens), double(answer_tokens)};
  }
  // The fields as one all-reduce carries them across ranks, and back: the one order of that packing.
  static constexpr size_t kNumSums = 7;
  std::array<double, kNumSums> sums() const {
    return {loss_sum, chosen_sum, rejected_sum, pairs, correct, tokens, answer_tokens};
  }
  static PairStats from_sums(const double* v) { return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]}; }
  void add(const PairStats& o) {
    loss_sum += o.loss_sum, chosen_sum += o.chosen_sum, rejected_sum += o.rejected_sum;
    pairs += o.pairs, correct += o.correct, tokens += o.tokens, answer_tokens += o.answer_tokens;
  }
  double loss() const { return pairs ? loss_sum / pairs : 0; }
  double accuracy() const { return pairs ? correct / pairs : 0; }
  double chosen() const { return pairs ? chosen_sum / pairs : 0; }
  double rejected() const { return pairs ? rejected_sum / pairs : 0; }
  // loss, accuracy, rewards, margin and pairs; with_tokens (training's records): "tokens" and "answer_tokens" too.
  nlohmann::json to_json(bool with_tokens = false) const;
  // "loss L | acc A | chosen C | rejected R | margin M | N pairs": every eval line prints this.
  std::string summary() const;
};

// Metrics of a split: all its pairs, and each named set's on its own. A train step or epoch under a
// training mix: each data.train_sets set (and data.train_files), in the mix's order.
struct SetStats {
  PairStats all;
  std::vector<std::pair<std::string, PairStats>> sets;
  // all's fields at the top, as before named sets existed, and "sets": {name: its fields} for each set with
  // pairs (a train step may hold none of a set's); with_tokens: each with its tokens (PairStats::to_json).
  nlohmann::json to_json(bool with_tokens = false) const;
  // "  set NAME | <summary>\n" for each set with pairs (printed under the eval or epoch line).
  std::string sets_text() const;
  // Each set's sums added to the same-named one's (sets in the same order, as every step of a run has them).
  void add(const SetStats& o);
};

// One evaluation: the whole test split (data.test_files and every data.test_sets set together; what
// run.keep_best and run.early_stop read) and each named set on its own, in data.test_sets' order.
struct EvalStats : SetStats {
  bool stopped = false;  // a stop signal cut the evaluation short: no numbers (train stops at once)
  double runtime_s = 0;  // its wall time (HF's eval_runtime): in the logged records, not in to_json's numbers
  // What an eval record logs (metrics.jsonl, `pmtrain eval`'s line): to_json and "runtime_s", "pairs_per_s".
  nlohmann::json record() const;
  // "<all's summary> in 1.2 s, 170 pairs/s": the eval line.
  std::string summary() const;
  double pairs_per_s() const { return runtime_s > 0 ? all.pairs / runtime_s : 0.0; }
};

class MetricsLog {
 public:
  // Continues the file, first dropping the records of steps after `keep_through_step` (a resumed run repeats
  // them, so a step appears once) and the records of an earlier end (the summary, the final eval: a resumed
  // run writes its own); keep_through_step < 0 (a fresh run) keeps nothing. Every record gets "time" (Unix
  // seconds). A tensorboard_dir (run.tensorboard) also gets the records as TensorBoard events: its event file is
  // rebuilt, beginning with the run's resolved config (given one): as text (TensorBoard's Text tab, tag "config",
  // to_yaml's) and as hyperparameters (the HParams tab, config_scalars'); then the kept records, then each new
  // record as it comes (tensorboard.h). The run's end is the session's end there (its status in the HParams
  // tab): success with the summary record; failure when the log is destroyed by an error (an exception
  // unwinding); none for a run stopped by a signal, which resumes.
  MetricsLog(const std::string& path, bool active, int64_t keep_through_step, const std::string& tensorboard_dir = "",
             const Config* config = nullptr);
  ~MetricsLog();
  void write(const nlohmann::json& record);
  bool active() const { return file_ != nullptr; }

 private:
  // Says once that records are being lost when `path`'s writes start failing, and again once they land again.
  struct LossWarning {
    bool failing = false;
    void after_write(bool written, const std::string& path);
  };
  void write_event(const nlohmann::json& record);  // the record into the event file; its step into last_step_
  FILE* file_ = nullptr;
  std::string path_;
  LossWarning file_warning_;
  std::unique_ptr<EventFile> events_;
  LossWarning events_warning_;
  int64_t last_step_ = 0;  // the highest step of a record written: where the session's end goes
  bool ended_ = false;     // the session's end written
};

std::string format_duration(double seconds);
// "12.3 GiB" from 1 GiB on, else "340 MiB".
std::string format_bytes(double bytes);

// The step-time breakdown of a train record ("time_s", one step) or the summary (the run's train steps):
// seconds per StepClock category plus "other" = wall_s - their sum (host work, idle, untimed engine work).
nlohmann::json time_breakdown_json(const StepTimes& t, double wall_s);
// "gemm 41% | attention 9% | ... | other 12%" (shares of wall_s), rank 0's line at the end of a run.
std::string time_shares_line(const StepTimes& t, double wall_s);
// A device clock's other half (StepTimes::host_seconds): the host's seconds inside each category's scopes,
// issuing its work, as JSON ({"gemm": s, ...}) and as shares of wall_s ("gemm 3.1% | ..."); where a category's
// host share comes near its device share, the GPU was waiting on the launches. null / "" on the host clock.
nlohmann::json host_time_json(const StepTimes& t);
std::string host_shares_line(const StepTimes& t, double wall_s);
// The named ops (StepTimes::ops: the model's and the engine's step's): {"swiglu_backward": {"s": seconds, "calls":
// n, "category": "elementwise", "bytes": b, "flops": f}, ...} (bytes and flops: the work the calls declared, when
// any; on a device clock "host_s", the host's time in its scopes, and "launches", the device work they queued:
// cuda/launch_count.h), and a line of them, slowest first, in milliseconds per step over `steps` steps, each with
// its rate and on a device clock the host's milliseconds and launches a step ("linear_forward 12.31 (612.0
// TFLOP/s; host 0.40, 112 launches) | swiglu_backward 3.20 (1830 GB/s; host 0.05, 28 launches) | ...").
nlohmann::json op_times_json(const StepTimes& t);
// An op's achieved rate from its declared work: "612.0 TFLOP/s" (FLOPs declared), "1830 GB/s" (bytes only), or "".
std::string op_rate(const OpTime& op);
std::string op_times_line(const StepTimes& t, double steps);

}  // namespace zero::pmtrain
