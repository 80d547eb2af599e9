// The reward-model trainer: assembles tokenizer, data, sampler, model and engine from a Config, and
// runs the step loop (micro-batches -> step -> log -> eval -> save). All ZeRO detail is in the engine.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpointer.h"
#include "comm/bootstrap.h"
#include "data/batcher.h"
#include "data/pair_dataset.h"
#include "data/sampler.h"
#include "data/tokenizer.h"
#include "model/reward_model.h"
#include "pmtrain/config.h"
#include "pmtrain/early_stop.h"
#include "pmtrain/engine_params.h"
#include "pmtrain/metrics.h"
#include "pmtrain/ordered_sums.h"
#include "pmtrain/planner.h"
#include "pmtrain/progress.h"
#include "pmtrain/train_stack.h"
#include "zero/engine.h"

namespace zero::pmtrain {

// Evaluate: the test split only; nothing is written to the run directory and no training state is set up.
enum class TrainerRole { Train, Evaluate };

class Trainer {
 public:
  // eval_checkpoint (Evaluate): the checkpoint whose weights it evaluates (any saved world size and stage); "":
  // the config's initial weights (model.hf_dir or the random init).
  Trainer(const Config& cfg, const LaunchInfo& info, Communicator& comm, TrainerRole role = TrainerRole::Train,
          const std::string& eval_checkpoint = "");
  ~Trainer();
  // Trains run.steps (or run.epochs) optimizer steps; evaluates every run.eval_every and at the end.
  // Returns the process exit code: 0, or kExitStopped after a signal (checkpoint saved).
  int train();  // an out-of-memory during the run is reported with the memory plan and what to change
  // Loss, accuracy, mean chosen/rejected reward and margin on the test split, and on each named test set
  // (data.test_sets) on its own (collective).
  EvalStats evaluate();
  const MemoryPlan& memory_plan() const { return plan_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  // set_name: a named test set (data.test_sets), for the message.
  data::PairDataset load_dataset(const std::vector<std::string>& files, const char* split,
                                 const std::string& set_name = "");
  // This rank's eval batches of one test set's first run.eval_pairs pairs, as many on every rank (eval_batch_):
  // with token budgets by batch.eval_micro_tokens (data::cut_by_tokens over the pairs, longest first), else
  // batch.eval_micro pairs, round-robin over the ranks; under zero.world_invariant cut as for one rank and
  // dealt whole (data::deal_micro_batches), so each batch is the same at any world size.
  std::vector<data::MicroBatchPlan> eval_batches(const data::PairDataset& pairs) const;
  // Rank 0's progress lines of a long evaluation (run.eval_progress_s): batches done of all the test sets'.
  struct EvalProgress {
    Progress clock;
    int64_t done = 0, total = 0;
    void batch_done(bool print);
  };
  // The local sums of one test set's eval batches; under zero.world_invariant `ordered` gets each batch's
  // sums in its slot of the cut.
  // nullopt: a stop signal (stop_vote) cut it short.
  std::optional<PairStats> evaluate_locally(const data::PairDataset& pairs, std::vector<data::MicroBatchPlan> batches,
                                            OrderedSums& ordered, EvalProgress& progress);
  // Collective: whether a rank got SIGTERM/SIGINT (train only: eval and score take no stop signals). Asked
  // before each evaluation batch, so a long evaluation ends within a batch of the signal.
  bool stop_vote();
  // Whether a save of `step` is held back, saying so: while steps are being skipped for a non-finite gradient
  // (skipped_in_a_row_ > 0), periodic and stop saves wait for a step that trains (the final save does not).
  bool held_back(int64_t step);
  // optim.max_skipped_steps reached at `step`: waits for pending saves, then a ConfigError naming the newest
  // checkpoint older than the weights that gave the first non-finite gradient.
  [[noreturn]] void stop_diverged(int64_t step, const StepResult& res, double loss);
  // Saves `step` (unless just saved or held back), says how to resume, returns kExitStopped; `cut`: what the
  // stop cut short.
  int stop_with_checkpoint(int64_t step, const char* cut, bool eval_owed);
  int64_t eval_count(const data::PairDataset& pairs) const;  // pairs of it an evaluation reads
  int64_t test_pairs() const;  // over every part of the test split
  int train_loop();
  // run.export (training done; collective): the final or best checkpoint as an HF model directory, its checksums
  // checked by every rank, written by rank 0.
  void export_at_end(int64_t end_step);
  // The step's metrics, reduced over ranks: all its pairs, and each training set's under a mix (train_sets_).
  SetStats run_train_step(data::StepPlan& plan, StepResult& result, double& pair_id_sum, bool& stop);
  // Collective, before the data is read: run.dir and the files the run writes there can be made and written
  // (nothing made yet), and a fresh run (no run.resume) in a run.dir holding checkpoints refused unless
  // run.start_over.
  void check_run_dir();
  // run.resume's checkpoint (agreed; nullopt: a fresh start), then the resume from it: its weights, optimizer
  // state, step and data order.
  std::optional<std::string> resume_choice();
  void resume(const std::string& path);
  double resume_check_s_ = 0;  // resume_choice's time: finding the checkpoint and hashing its files
  // metrics.jsonl's record of the resume (type "resume"), written once the metrics file is open; null when fresh.
  nlohmann::json resume_record_;
  // eval: the evaluation at this step, stored with the checkpoint (run.keep_best ranks checkpoints by it).
  // eval_owed: a stop came before the step's evaluation ended; the resumed run evaluates, then pay_owed_eval.
  void save_checkpoint(int64_t step, const EvalStats* eval = nullptr, bool eval_owed = false);
  // Whether a periodic evaluation runs after `step` (run.eval_every; the final one is not periodic).
  bool evaluates_at(int64_t step) const;
  // The owed evaluation of `step` ran: its checkpoint gets it and the early-stop count after it (amend_extra).
  void pay_owed_eval(int64_t step, const EvalStats& ev);
  // Writes an evaluation's metrics record and prints its lines (final: the run's last).
  void log_eval(const EvalStats& ev, int64_t step, bool final);
  void wait_for_saves(bool all);  // finish_pending (all = false) or wait for every save (all = true)
  // Set-up, data loading and checkpoint I/O: one rank may keep the others waiting long there
  // (run.slow_phase_timeout_s instead of run.collective_timeout_s).
  // Both of the run's communicators: the MPI world and, on the CUDA backend, the engine's NCCL one (whose
  // waits a checkpoint's collectives and the compute stream's host waits go through).
  Communicator::SlowPhase slow_phase() {
    return Communicator::SlowPhase({&comm_, stack_.engine_comm.get(), stack_.replica_comm.get()},
                                   cfg_.run.slow_phase_timeout_s);
  }
  void log(const char* fmt_line) const;

  Config cfg_;
  LaunchInfo info_;
  Communicator& comm_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  data::PairDataset train_;
  data::Mix train_mix_;  // data.train_sets with data.train_weights (train_split.h); empty without sets
  // A mix of two or more sources: each training pair's source (its place in train_mix_), which the pair loss
  // sums metrics by (per-set train metrics); else empty.
  std::vector<int32_t> train_set_of_;
  // The test split in parts: data.test_files (name "") if given, then each data.test_sets set by name.
  struct TestSet {
    std::string name;
    data::PairDataset pairs;
  };
  std::vector<TestSet> test_sets_;
  data::BatchConfig batch_cfg_;
  ResolvedBatch batch_{};
  std::unique_ptr<data::PairSampler> sampler_;
  model::Qwen3Config model_cfg_;
  TrainStack stack_;  // backend, model, engine and the model's view of its parameters
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<checkpoint::Checkpointer> ckpt_;
  MemoryPlan plan_;
  EvalBatch eval_batch_;  // pairs (or tokens) per evaluation batch, from the plan (planner.h)
  int64_t total_steps_ = 0;
  int64_t start_step_ = 0;  // steps already done (resume)
  int64_t last_saved_step_ = -1;  // the newest checkpoint this run saved
  bool stoppable_ = false;  // train: stop signals are taken (stop_vote)
  bool start_over_ = false;  // run.start_over as given (cfg_ says false once it is acted on)
  int64_t skipped_in_a_row_ = 0;  // optimizer steps skipped in a row for a non-finite gradient, up to now
  bool eval_owed_ = false;  // the checkpoint resumed from lacks its step's evaluation (a stop cut it short)
  EarlyStop early_;  // run.early_stop's count, restored on resume
};

}  // namespace zero::pmtrain
