#include "pmtrain/trainer.h"

#include <fmt/ranges.h>
#include <mpi.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "checkpoint/agree.h"
#include "checkpoint/shared_dir.h"
#include "checkpoint/verify.h"
#include "comm/hybrid_groups.h"
#include "comm/launch_env.h"
#include "core/check.h"
#include "core/process_memory.h"
#include "data/token_cache.h"
#include "model/hf_export.h"
#include "pmtrain/backend_setup.h"
#include "pmtrain/config_changes.h"
#include "pmtrain/data_setup.h"
#include "pmtrain/engine_assembly.h"
#include "pmtrain/export_command.h"
#include "pmtrain/model_setup.h"
#include "pmtrain/ordered_sums.h"
#include "pmtrain/paths.h"
#include "pmtrain/stop_signals.h"
#include "pmtrain/train_split.h"
#include "pmtrain/train_stack.h"
#include "pmtrain/train_step.h"

namespace zero::pmtrain {
namespace fs = std::filesystem;

namespace {

// zero.world_invariant: this rank's micro-batches' sums into their slots of the cut. each[k]: the k-th of
// `micro` that had pairs (the model ran a pair loss for it).
void put_in_order(OrderedSums& ordered, const std::vector<data::MicroBatchPlan>& micro,
                  const std::vector<model::PairStats>& each) {
  if (ordered.slots().empty()) return;
  size_t k = 0;
  for (const data::MicroBatchPlan& mb : micro)
    if (!mb.pair_ids.empty()) {
      ZERO_CHECK(k < each.size(), "{} micro-batches with pairs but {} pair-loss sums", k + 1, each.size());
      ordered.put(mb.index, each[k++]);
    }
  ZERO_CHECK(k == each.size(), "{} micro-batches with pairs but {} pair-loss sums", k, each.size());
}

// The all-reduced slots (at `reduced`) replace the world-dependent sums of st, and of each of `sets` (the
// slots' groups), with the ordered ones.
void take_in_order(OrderedSums& ordered, const double* reduced, PairStats& st,
                   std::vector<std::pair<std::string, PairStats>>* sets = nullptr) {
  if (ordered.slots().empty()) return;
  std::copy(reduced, reduced + ordered.slots().size(), ordered.slots().begin());
  auto take = [&](PairStats& p, int64_t group) {
    p.loss_sum = ordered.loss_sum(group), p.chosen_sum = ordered.chosen_sum(group);
    p.rejected_sum = ordered.rejected_sum(group);
  };
  take(st, -1);
  if (sets)
    for (size_t g = 0; g < sets->size(); ++g) take((*sets)[g].second, int64_t(g));
}
double now() { return MPI_Wtime(); }

// What a checkpoint's trainer state says of its step's evaluation.
nlohmann::json eval_extra(const EvalStats& ev) { return {{"eval", ev.to_json()}}; }
// run.keep_best (of run.keep_best_set): the metric in the checkpoint's trainer state (a pointer into
// eval_extra; the metric's config spelling is its JSON key, PairStats::to_json) and which way is better;
// early_stop reads an evaluation's value through the same pointer (metric_value).
checkpoint::BestMetric best_metric(const RunSection& r) {
  if (r.keep_best == KeepBest::None) return {};
  const std::string of = r.keep_best_set.empty() ? "/eval" : "/eval/sets/" + r.keep_best_set;
  return {of + "/" + keep_best_name(r.keep_best), r.keep_best == KeepBest::Accuracy};
}
double metric_value(const RunSection& r, const EvalStats& ev) {
  return eval_extra(ev).at(nlohmann::json::json_pointer(best_metric(r).metric)).get<double>();
}
// "loss", or "loss of set NAME", for the run's lines.
std::string best_metric_name(const RunSection& r) {
  return keep_best_name(r.keep_best) + (r.keep_best_set.empty() ? "" : " of set " + r.keep_best_set);
}
// The checks that every save gets an evaluation, and that early_stop has a metric to count.
void check_keep_best(const Config& c) {
  ZERO_REQUIRE(c.run.early_stop == 0 || (c.run.keep_best != KeepBest::None && c.run.eval_every > 0), ConfigError,
               "{}: run.early_stop {} counts evaluations of run.keep_best's metric: set run.keep_best (loss or "
               "accuracy) and run.eval_every (now {})",
               c.source, c.run.early_stop, c.run.eval_every);
  ZERO_REQUIRE(c.run.keep_best_set.empty() || c.run.keep_best != KeepBest::None, ConfigError,
               "{}: run.keep_best_set '{}' names the set run.keep_best ranks by, but run.keep_best is none", c.source,
               c.run.keep_best_set);
  ZERO_REQUIRE(c.run.keep_best_set.empty() || c.data.test_sets.contains(c.run.keep_best_set), ConfigError,
               "{}: run.keep_best_set '{}' is not a data.test_sets set (the sets: {})", c.source, c.run.keep_best_set,
               set_names(c.data.test_sets));
  if (c.run.keep_best == KeepBest::None) return;
  const std::string name = keep_best_name(c.run.keep_best);
  ZERO_REQUIRE(!c.data.test_files.empty() || !c.data.test_sets.empty(), ConfigError,
               "{}: run.keep_best is {}: checkpoints are ranked by their evaluation, but data.test_files and "
               "data.test_sets are empty",
               c.source, name);
  ZERO_REQUIRE(c.run.save_every == 0 || (c.run.eval_every > 0 && c.run.save_every % c.run.eval_every == 0), ConfigError,
               "{}: run.keep_best is {}: every saved step needs an evaluation, but run.save_every ({}) is not a "
               "multiple of run.eval_every ({}); set run.eval_every to {} or a divisor of it",
               c.source, name, c.run.save_every, c.run.eval_every, c.run.save_every);
}
// run.export's checks: best needs run.keep_best's ranking, final the last step's checkpoint, and run.export_dir
// must be one an export may write.
void check_export(const Config& c) {
  ZERO_REQUIRE(c.run.export_model != RunExport::Best || c.run.keep_best != KeepBest::None, ConfigError,
               "{}: run.export is best: the checkpoint run.keep_best ranks best, but run.keep_best is none (set it to "
               "loss or accuracy, or export final)", c.source);
  ZERO_REQUIRE(c.run.export_model != RunExport::Final || c.run.save_final, ConfigError,
               "{}: run.export is final: the last step's checkpoint, but run.save_final is false", c.source);
  // The directory is checked now: a refusal at the end would come after the whole run.
  if (c.run.export_model != RunExport::None) model::check_export_target(export_dir(c.run));
}
// The files a training run writes into run.dir beside its checkpoints, checked before the data is read: a path in
// the way (a directory named metrics.jsonl, a file named tensorboard, a read-only run.dir) stops the run at once,
// naming it, not after tokenizing. Nothing is made here: a run that cannot start leaves no run.dir behind.
void check_run_files(const Config& c) {
  const RunFiles files(c.run.dir);
  check_dir_creatable(c.run.dir, "run.dir");
  if (!fs::is_directory(c.run.dir)) return;  // made when the run starts: nothing in it can be in the way
  check_writable_file(files.metrics(), "run.dir");
  check_writable_file(files.resolved_config(), "run.dir");
  if (c.run.tensorboard) check_dir_creatable(files.tensorboard(), "run.tensorboard");
}
}  // namespace

Trainer::Trainer(const Config& cfg, const LaunchInfo& info, Communicator& comm, TrainerRole role,
                 const std::string& eval_checkpoint)
    : cfg_(cfg), info_(info), comm_(comm) {
  const auto slow = slow_phase();
  const bool training = role == TrainerRole::Train;
  stoppable_ = training;
  // run.start_over acts once, here: the resolved config and the checkpoints' copy say false, so running them
  // again (the resume hint names config.resolved.yaml) never removes this run's checkpoints.
  start_over_ = cfg_.run.start_over;
  cfg_.run.start_over = false;
  const int W = comm_.world();
  // zero.shard_ranks node: the launch's ranks per node; a shard group across nodes is allowed, and said.
  resolve_shard_ranks(cfg_, node_block_ranks(info_.node_of_rank));
  resolve_rank_threads(cfg_, info_.local_world);
  if (const std::string w = shard_placement_warning(cfg_, info_.node_of_rank); info_.rank == 0 && !w.empty())
    fprintf(stderr, "pmtrain: %s\n", w.c_str());
  if (training) {
    check_keep_best(cfg_);
    check_export(cfg_);
    check_run_dir();  // before the data is read: a refusal should not wait for tokenizing
  }
  batch_ = run_batch(cfg_, W);  // the same batch `pmtrain plan` shows (engine_assembly.h)
  if (cfg_.batch.world > 0 && cfg_.batch.world != W) {
    if (info_.rank == 0)
      fprintf(stderr, "pmtrain: batch.world %lld != %d launched ranks; keeping the global batch and deriving accum\n",
              (long long)cfg_.batch.world, W);
    cfg_.batch.accum = 0;  // as resolved (config.resolved.yaml)
  }

  tokenizer_ = std::make_unique<data::Tokenizer>(data::Tokenizer::from_file(cfg_.data.tokenizer));
  // Model and memory plan first: a run that cannot fit stops before any data is read.
  const int64_t micro_pairs = batch_.micro;
  model_cfg_ = resolve_model_config(cfg_.model, tokenizer_->vocab_size());
  // Exported models must know their pad and end tokens (HF pools the rightmost non-pad token).
  if (model_cfg_.pad_token_id < 0) model_cfg_.pad_token_id = tokenizer_->pad_id();
  if (model_cfg_.eos_token_ids.empty() && tokenizer_->eos_id() >= 0) model_cfg_.eos_token_ids = {tokenizer_->eos_id()};
  // Evaluation batches from the config as written, before activation_checkpointing and micro_tokens auto are
  // resolved (they depend on the GPUs and the world size): the same batches at any world size (eval_batch).
  eval_batch_ = eval_batch(cfg_, model_cfg_, model_device(cfg_), micro_pairs);
  plan_ = plan_and_check_run(cfg_, model_cfg_, info_.rank, W, info_.local_world, micro_pairs, batch_.accum);

  if (training) {
    TrainSplit split = load_train_split(cfg_, [this](const std::vector<std::string>& files, const std::string& set) {
      return load_dataset(files, "train", set);
    });
    train_ = std::move(split.pairs);
    train_mix_ = std::move(split.mix);
    if (train_mix_.size() >= 2) {
      train_set_of_.assign(size_t(train_.num_pairs()), 0);
      for (size_t g = 0; g < train_mix_.size(); ++g)
        std::fill_n(train_set_of_.begin() + train_mix_[g].first, train_mix_[g].count, int32_t(g));
    }
    const int64_t epoch_pairs = data::epoch_pairs(train_mix_, train_.num_pairs());
    ZERO_REQUIRE(epoch_pairs >= W, ConfigError,
                 "{}: the training data has {} pairs an epoch, fewer than the {} ranks launched; use fewer ranks or more "
                 "data", cfg_.source, epoch_pairs, W);
    ZERO_REQUIRE(epoch_pairs >= batch_.global, ConfigError,
                 "{}: batch.global is {} pairs but the training data has only {} an epoch", cfg_.source, batch_.global,
                 epoch_pairs);
  }
  if (!cfg_.data.test_files.empty()) test_sets_.push_back({"", load_dataset(cfg_.data.test_files, "test")});
  for (const auto& [name, files] : cfg_.data.test_sets) test_sets_.push_back({name, load_dataset(files, "test", name)});
  ZERO_REQUIRE(training || test_pairs() > 0, ConfigError,
               "{}: eval: data.test_files and data.test_sets give no test pairs", cfg_.source);
  batch_cfg_ = batch_config(cfg_.data);

  if (training) {
    data::SamplerConfig sc = sampler_config(cfg_, batch_);
    sc.mix = train_mix_;
    sampler_ = std::make_unique<data::PairSampler>(sc, train_.num_pairs(),
                                                   data::pair_tokens(train_, batch_cfg_), info_.rank, W);
    total_steps_ = cfg_.run.steps > 0 ? cfg_.run.steps : cfg_.run.epochs * sampler_->steps_per_epoch();
    ZERO_REQUIRE(total_steps_ > 0, ConfigError, "{}: nothing to train (run.steps and run.epochs give 0 steps)", cfg_.source);
  } else {
    total_steps_ = 1;  // the engine's LR schedule needs a length; evaluation never steps
  }

  const EngineConfig ec = engine_config(cfg_, W, batch_.accum, total_steps_);

  stack_ = assemble_train_stack(cfg_, comm_, model_cfg_, ec);  // the same model, now on the backend's ops

  if (info_.rank == 0 && !training) {
    int64_t n = 0, per_rank = 0;
    for (const TestSet& t : test_sets_) n += eval_count(t.pairs), per_rank += int64_t(eval_batches(t.pairs).size());
    printf("pmtrain: eval of %lld of %lld test pairs, world %d, %s, batches of at most %s (%lld per rank)\n",
           (long long)n, (long long)test_pairs(), W, stage_text(cfg_, W).c_str(), eval_batch_.describe().c_str(),
           (long long)per_rank);
    fflush(stdout);
  }
  // run.start_over: the earlier run's checkpoints go only now that this run is set up (a run that cannot
  // start replaces nothing); its metrics.jsonl is replaced when this run opens the file. Agreed, as every write
  // rank 0 makes for the run: a failure there ends every rank with its message, none left in a collective.
  if (training) {
    checkpoint::run_agreed(comm_, [&] {
      if (info_.rank == 0) make_dir(cfg_.run.dir, "run.dir");
    });
    checkpoint::require_shared_dir(comm_, cfg_.run.dir, "run.dir");  // now, not at the first save hours in
  }
  if (training) checkpoint::run_agreed(comm_, [&] {
    if (info_.rank != 0) return;
    if (!start_over_ || !cfg_.run.resume.empty()) return;
    const checkpoint::RunPaths paths(cfg_.run.dir);
    if (const std::vector<int64_t> earlier = checkpoint::list_steps(paths); !earlier.empty()) {
      checkpoint::remove_all_checkpoints(paths);
      printf("pmtrain: run.start_over: removed the earlier run's checkpoints in %s (step_%s) and its metrics\n",
             paths.root.c_str(), fmt::format("{}", fmt::join(earlier, ", step_")).c_str());
    }
  });
  checkpoint::CheckpointOptions co;
  co.run_dir = cfg_.run.dir;
  co.retention = {int(cfg_.run.keep_last), int(cfg_.run.keep_every), best_metric(cfg_.run)};
  early_.patience = cfg_.run.early_stop;
  early_.higher_is_better = best_metric(cfg_.run).higher_is_better;
  early_.metric = best_metric(cfg_.run).metric;
  co.async = cfg_.run.async_save;
  co.config_text = to_yaml(cfg_);
  co.world = &comm_;  // every rank (the engine's communicator is a shard group's under hybrid sharding)
  if (info_.rank == 0 && cfg_.run.eval_progress_s > 0) {
    // Resuming a large run reads and hashes for minutes (48 GB of optimizer state for a 4B model on one GPU):
    // rank 0 says how far its share has come, as an evaluation does, timed from its first read.
    co.on_read = [every_s = cfg_.run.eval_progress_s, lines = std::shared_ptr<Progress>(), bytes = uint64_t(0)](
                     uint64_t n) mutable {
      if (!lines) lines = std::make_shared<Progress>(every_s);
      bytes += n;
      if (!lines->due()) return;
      printf("pmtrain: reading checkpoint files: %s read by rank 0 so far, %s/s\n", format_bytes(double(bytes)).c_str(),
             format_bytes(double(bytes) / std::max(1e-9, lines->elapsed_s())).c_str());
    };
  }
  ckpt_ = std::make_unique<checkpoint::Checkpointer>(*stack_.engine, co);
  // The weights come from a checkpoint (the one a resume continues, the one eval evaluates) or are the config's
  // initial ones, never both: an init a load then replaces costs minutes at 8B (7.57e9 samples).
  const std::optional<std::string> resume_from = training ? resume_choice() : std::nullopt;
  const std::string init = resume_from ? "the weights of the checkpoint resumed from, below"
                           : training  ? init_stack_weights(stack_, cfg_, model_cfg_, info_.local_world)
                                       : "";
  if (info_.rank == 0 && training) {
    printf("pmtrain: %s, world %d (%d nodes), %s, %s\n", cfg_.source.c_str(), W, info_.node_count,
           stage_text(cfg_, W).c_str(), info_.launcher.c_str());
    printf("pmtrain: params %s, gradients accumulated in %s%s, reduced in %s; master weights %s\n",
           dtype_name(ec.param_dtype), dtype_name(ec.accum_dtype), cfg_.zero.accum_dtype ? "" : " (zero.accum_dtype auto)",
           dtype_name(ec.reduce_dtype),
           ec.split_master            ? "fp32 split: the bf16 params + their low 16 bits (zero.master)"
           : ec.offload_optimizer     ? fmt::format("fp32, with m and v in host memory, stepped by {} host thread{} "
                                                    "(zero.offload)", ec.offload_threads, ec.offload_threads > 1 ? "s" : "").c_str()
                                      : "fp32");
    printf("pmtrain: model %lld layers, hidden %lld, %zu parameters (%s)\n", (long long)model_cfg_.num_layers,
           (long long)model_cfg_.hidden_size, stack_.engine->partition().total_numel, init.c_str());
    printf("pmtrain: data %lld train pairs, %lld test pairs; %s\n", (long long)train_.num_pairs(),
           (long long)test_pairs(), train_.stats.report().c_str());
    if (!train_mix_.empty()) printf("pmtrain: training mix (data.train_sets x data.train_weights): %s\n",
                                    describe_mix(train_mix_).c_str());
    int64_t shared = 0;
    for (int64_t p = 0; p < train_.num_pairs(); ++p) shared += data::shared_prompt(train_, p, batch_cfg_);
    if (shared > 0)
      printf("pmtrain: shared prompts (data.share_prompt): %lld of the training answers' %lld tokens computed once "
             "(%.1f%% fewer)\n",
             (long long)shared, (long long)train_.tokens.size(), 100.0 * double(shared) / double(train_.tokens.size()));
    if (cfg_.batch.micro_tokens > 0)
      printf("pmtrain: batch global %lld pairs per step over %d ranks, micro-batches of at most %lld tokens%s "
             "(accumulation varies per step); %lld steps (%lld per epoch)\n",
             (long long)batch_.global, W, (long long)cfg_.batch.micro_tokens,
             cfg_.batch.micro_tokens_auto ? " (batch.micro_tokens auto: the most whose memory plan fits)" : "",
             (long long)total_steps_, (long long)sampler_->steps_per_epoch());
    else
      printf("pmtrain: batch global %lld = micro %lld x accum %lld x world %d; %lld steps (%lld per epoch)\n",
             (long long)batch_.global, (long long)batch_.micro, (long long)batch_.accum, W, (long long)total_steps_,
             (long long)sampler_->steps_per_epoch());
    if (test_pairs() > 0)
      printf("pmtrain: evaluation batches of at most %s per rank (%s)\n", eval_batch_.describe().c_str(),
             cfg_.batch.eval_micro + cfg_.batch.eval_micro_tokens > 0 ? "as set" : "what the step's activation memory holds");
    printf("pmtrain: backend %s; %lld math thread%s a rank%s\n", stack_.backend_description.c_str(),
           (long long)cfg_.threads, cfg_.threads > 1 ? "s" : "",
           cfg_.threads_from == ThreadsFrom::OmpNumThreads ? fmt::format(" ({})", env_var_name(EnvVar::NumThreads)).c_str()
           : cfg_.threads_from == ThreadsFrom::CoreShare   ? " (its share of the node's cores)"
                                                            : "");
    // Threads that outnumber their cores slow every step where they do a step's work: the CPU backend's math
    // (OpenMP threads spin against each other) and an offloaded AdamW; a GPU run's `threads` do no other.
    const int busy = cfg_.backend == Backend::Cpu ? int(cfg_.threads) : ec.offload_optimizer ? ec.offload_threads : 1;
    if (const std::string over = threads_oversubscription(busy, info_.local_world); !over.empty())
      printf("pmtrain: warning: %s: oversubscribed threads contend for the cores and slow every step; set threads (or "
             "OMP_NUM_THREADS) to at most the cores over the node's ranks\n",
             over.c_str());
    if (cfg_.model.checkpointing_auto)
      printf("pmtrain: activation checkpointing %s (model.activation_checkpointing auto: the least recompute whose "
             "memory plan fits)\n",
             checkpointing_text(cfg_.model, model_cfg_.num_layers).c_str());
    printf("pmtrain: memory plan %s\n", plan_.describe().c_str());
    printf("--- resolved config (saved to %s/config.resolved.yaml) ---\n%s---\n", cfg_.run.dir.c_str(),
           to_yaml(cfg_).c_str());
    fflush(stdout);
  }
  if (!training) {
    if (eval_checkpoint.empty()) {
      init_stack_weights(stack_, cfg_, model_cfg_, info_.local_world);
    } else {
      const auto slow = slow_phase();
      ckpt_->load(eval_checkpoint);
    }
    return;
  }
  if (resume_from) resume(*resume_from);
  // Only now that the checkpoint was taken: a resume refused (another seed, say) leaves the run's file as it was.
  const RunFiles files(cfg_.run.dir);
  checkpoint::run_agreed(comm_, [&] {
    if (info_.rank == 0) {
      std::ofstream resolved(files.resolved_config());
      resolved << to_yaml(cfg_);
      resolved.close();
      ZERO_REQUIRE(resolved, InputError, "run.dir: cannot write {}", files.resolved_config());
    }
    // A fresh run keeps no step's record (-1: not even the step-0 eval of run.eval_at_start).
    metrics_ = std::make_unique<MetricsLog>(files.metrics(), info_.rank == 0, start_step_ > 0 ? start_step_ : -1,
                                            cfg_.run.tensorboard ? files.tensorboard() : "", &cfg_);
    if (!resume_record_.is_null()) metrics_->write(resume_record_);
  });
}

// The checkpointer holds the engine: end it first (the stack then ends in its own order).
Trainer::~Trainer() {
  ckpt_.reset();
  metrics_.reset();
}

void Trainer::check_run_dir() {
  // Every rank throws the same error (agreed).
  checkpoint::run_agreed(comm_, [&] {
    if (info_.rank != 0) return;
    check_run_files(cfg_);
    if (!cfg_.run.resume.empty()) {  // resuming wins: launch/run.sh passes run.start_over, and a user may add --resume
      if (start_over_)
        printf("pmtrain: run.start_over is ignored: this run resumes (run.resume %s), and removes nothing\n",
               cfg_.run.resume.c_str());
      return;
    }
    // A run directory with checkpoints is someone's run: a fresh run there would mix two runs' checkpoints
    // (retention and run.keep_best would rank the old ones beside the new) and replace its metrics and
    // resolved config, so it takes an explicit choice.
    const std::vector<int64_t> steps = checkpoint::list_steps(checkpoint::RunPaths(cfg_.run.dir));
    ZERO_REQUIRE(steps.empty() || start_over_, ConfigError,
                 "{}: run.dir {} already holds checkpoints (newest step_{}); continue it with --resume auto, train "
                 "elsewhere with --set run.dir=NEW_DIR, or start over there with --set run.start_over=true (which "
                 "removes them and the run's metrics)",
                 cfg_.source, cfg_.run.dir, steps.empty() ? 0 : steps.back());
  });
}

std::optional<std::string> Trainer::resume_choice() {
  const auto slow = slow_phase();  // the constructor's scope began before the engine's communicator existed
  if (cfg_.run.resume.empty()) return std::nullopt;  // check_run_dir said a fresh run may start here
  const double t0 = now();
  const auto path = ckpt_->resume_path(cfg_.run.resume);
  resume_check_s_ = now() - t0;
  if (!path && info_.rank == 0)
    printf("pmtrain: resume auto: no checkpoint in %s yet, starting fresh\n", cfg_.run.dir.c_str());
  return path;
}

void Trainer::resume(const std::string& path) {
  const auto slow = slow_phase();
  const double t0 = now();
  const checkpoint::LoadResult r = ckpt_->load(path);
  const double load_s = now() - t0;
  try {  // the data order goes on where it stopped only under the settings that made it
    sampler_->restore(data::SamplerCursor::from_json(r.state.data_cursor));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: cannot continue the data order of checkpoint {}: {}. Resume with the run's "
                                  "run.seed, data and batch settings (its resolved config is the \"config\" field "
                                  "of {}/manifest.json), or train elsewhere with --set run.dir=NEW_DIR",
                                  cfg_.source, path, e.what(), path));
  }
  start_step_ = r.state.step;
  eval_owed_ = r.state.extra.is_object() && r.state.extra.value("eval_owed", false);
  std::error_code ec;  // this run's own checkpoint of start_step_: a stop before the next step need not save it again
  if (fs::equivalent(r.dir, ckpt_->paths().step_dir(start_step_), ec)) last_saved_step_ = start_step_;
  if (r.state.extra.is_object() && r.state.extra.contains("early_stop") && !early_.restore(r.state.extra["early_stop"]) &&
      info_.rank == 0)
    printf("pmtrain: run.early_stop counts %s afresh: the checkpoint's count is of another metric (%s)\n",
           best_metric_name(cfg_.run).c_str(), r.state.extra["early_stop"].value("metric", std::string("?")).c_str());
  ZERO_REQUIRE(start_step_ <= total_steps_, ConfigError,
               "{}: checkpoint {} is at step {}, past this run's {} steps", cfg_.source, path, start_step_, total_steps_);
  if (info_.rank == 0)
    printf("pmtrain: resumed from %s: step %lld, optimizer step %lld, saved at world %d%s stage %d%s; found and "
           "checked in %.1f s, loaded in %.1f s (%s read by rank 0)\n", r.dir.c_str(), (long long)start_step_,
           (long long)r.optimizer_step, r.saved_world * r.saved_shard_groups,
           r.saved_shard_groups > 1 ? fmt::format(" (shard groups of {})", r.saved_world).c_str() : "", r.saved_stage,
           r.resharded ? " (resharded onto this world size and stage)" : "", resume_check_s_, load_s,
           format_bytes(double(r.bytes_read)).c_str());
  // Where the run's history restarts, for whoever reads metrics.jsonl after preemptions: the step (the records
  // past it were dropped), the checkpoint, and the world it was saved at and runs on now.
  resume_record_ = {{"type", "resume"},
                    {"step", start_step_},
                    {"checkpoint", r.dir},
                    {"saved_world", r.saved_world * r.saved_shard_groups},
                    {"world", comm_.world()},
                    {"resharded", r.resharded},
                    {"load_s", load_s}};
  // The settings this run changes from the one that saved the checkpoint. Said, not refused: a learning rate
  // lowered to tame a divergence is a resume's purpose; the data order's settings are refused by the sampler.
  if (info_.rank == 0)
    if (const std::string line = settings_changed_line(r.config, cfg_, r.dir); !line.empty())
      printf("pmtrain: %s\n", line.c_str());
}

void Trainer::wait_for_saves(bool all) {
  const auto slow = slow_phase();
  if (all) {
    ckpt_->wait();
  } else {
    ckpt_->finish_pending();
  }
}

void Trainer::save_checkpoint(int64_t step, const EvalStats* eval, bool eval_owed) {
  const auto slow = slow_phase();
  checkpoint::TrainState st;
  st.step = step;
  st.data_cursor = sampler_->cursor().to_json();
  st.rng = {{"sampler_seed", cfg_.run.seed}};  // all randomness is derived from seeds and the cursor
  st.extra = {{"model_config", model::hf_config_json(model_cfg_)},
              {"tokenizer", cfg_.data.tokenizer},
              {"tokenizer_config", (fs::path(cfg_.data.tokenizer).parent_path() / "tokenizer_config.json").string()}};
  if (eval) st.extra.update(eval_extra(*eval));
  if (eval_owed) st.extra["eval_owed"] = true;  // a stop cut its evaluation short: the resumed run runs it
  if (early_.patience > 0) st.extra["early_stop"] = early_.to_json();
  ckpt_->save(st);
  last_saved_step_ = step;
  if (info_.rank == 0 && !cfg_.run.async_save) printf("checkpoint: saved step_%lld\n", (long long)step);
}

data::PairDataset Trainer::load_dataset(const std::vector<std::string>& files, const char* split,
                                        const std::string& set_name) {
  const std::string what = set_name.empty() ? fmt::format("{} split", split) : fmt::format("{} set '{}'", split, set_name);
  const std::string key =
      set_name.empty() ? fmt::format("data.{}_files", split) : fmt::format("data.{}_sets.{}", split, set_name);
  std::set<fs::path> seen;  // a file given twice (or by two globs) would count its pairs twice
  for (const std::string& f : files)
    ZERO_REQUIRE(seen.insert(fs::weakly_canonical(f)).second, ConfigError, "{}: {} gives {} twice: the {} would hold "
                 "its pairs twice", cfg_.source, key, f, what);
  const data::DataConfig dc = data_config(cfg_.data, files);
  const std::string cache = dataset_cache_file(cfg_.data, dc, split);
  // Rank 0 tokenizes (or finds the cache) first; the others then read the cache it wrote.
  data::PairDataset ds;
  std::string error;
  if (info_.rank == 0) {
    try {
      make_dir(cfg_.data.cache_dir, "data.cache_dir");
      data::CacheStatus st;
      ds = data::load_or_build_dataset(dc, *tokenizer_, cache, &st);
      // Files that give no pair are a mistake in the data or the config, never an empty split to go on with
      // (a test set of 0 pairs would score loss 0 and win run.keep_best): name the key, its files and why
      // their lines went, in one line (the counts live in the cache too, so a warm cache says it as well).
      if (ds.num_pairs() == 0) {
        std::string why = ds.stats.report();
        for (size_t at; (at = why.find('\n')) != std::string::npos;) why.replace(at, why.find_first_not_of(' ', at + 1) - at, "; ");
        error = fmt::format("{}: the {} ({}: {}) has no pairs left ({})", cfg_.source, what, key, fmt::join(files, ", "), why);
      } else {
        printf("pmtrain: %s: %lld pairs (cache %s: %s)\n", what.c_str(), (long long)ds.num_pairs(),
               data::cache_status_name(st), cache.c_str());
      }
    } catch (const Error& e) {
      error = e.what();
    }
  }
  double failed = error.empty() ? 0 : 1;
  comm_.all_reduce_scalars(&failed, 1, ReduceOp::Max);
  if (failed > 0) {
    if (error.empty()) throw PeerFailure("rank 0 could not load the data (see its message)");
    throw InputError(error);
  }
  if (info_.rank != 0) ds = data::load_or_build_dataset(dc, *tokenizer_, cache, nullptr);
  return ds;
}

SetStats Trainer::run_train_step(data::StepPlan& plan, StepResult& result, double& pair_id_sum, bool& stop) {
  PairStats local;
  std::vector<model::PairStats> each;  // the model's sums of each micro-batch with data, in order
  double ids = 0;  // sum of the real pairs' dataset ids: lets tests prove no pair is repeated or skipped
  for (const data::MicroBatchPlan& mb : plan.micro)
    for (size_t i = 0; i < mb.pair_ids.size(); ++i)
      if (mb.pair_mask.empty() || mb.pair_mask[i]) ids += double(mb.pair_ids[i]);
  const size_t sets = train_set_of_.empty() ? 0 : train_mix_.size();
  std::vector<int64_t> set_tokens(sets), set_answer_tokens(sets);  // each set's pairs', masked fillers too
  result = train_step(
      *stack_.engine, *stack_.model, *stack_.access, plan.micro.size(),
      [&](size_t i) -> std::optional<data::PairBatch> {
        const data::MicroBatchPlan& mb = plan.micro[i];
        if (mb.pair_ids.empty()) return std::nullopt;
        data::PairBatch batch = data::make_batch(train_, mb.pair_ids, mb.pair_mask, batch_cfg_);
        if (sets > 0) {  // the pair loss sums each set's pairs apart too
          batch.groups = int32_t(sets);
          for (const int64_t id : mb.pair_ids) batch.pair_group.push_back(train_set_of_[size_t(id)]);
          for (int64_t k = 0; k < batch.num_pairs(); ++k) {
            set_tokens[size_t(batch.pair_group[size_t(k)])] += batch.pair_real_tokens(k);
            set_answer_tokens[size_t(batch.pair_group[size_t(k)])] += batch.pair_answer_tokens(k);
          }
        }
        return batch;
      },
      plan.global_real_pairs, local, &each);
  // The metrics reduction also carries the stop vote: any rank that got SIGTERM/SIGINT stops them all here;
  // each set's sums under a mix; under zero.world_invariant also each micro-batch's sums, to be added in the
  // step's order.
  constexpr size_t N = PairStats::kNumSums;
  std::vector<double> sums(N + 2);
  const auto stats = local.sums();
  std::copy(stats.begin(), stats.end(), sums.begin());
  sums[N] = ids;
  sums[N + 1] = stop_requested() ? 1.0 : 0.0;
  model::PairStats local_sets = model::PairStats::sum(each);  // its groups: each set's sums, call by call
  local_sets.groups.resize(sets);  // zeros where this rank's micro-steps held no pair
  for (size_t g = 0; g < sets; ++g) {
    const auto set_sums = PairStats::of(local_sets.groups[g], set_tokens[g], set_answer_tokens[g]).sums();
    sums.insert(sums.end(), set_sums.begin(), set_sums.end());
  }
  OrderedSums ordered(cfg_.zero.world_invariant ? plan.micro.size() * size_t(comm_.world()) : 0, sets);
  put_in_order(ordered, plan.micro, each);
  sums.insert(sums.end(), ordered.slots().begin(), ordered.slots().end());
  {
    const StepClock::Scope waiting(stack_.clock.get(), TimeCategory::Comm);  // a slower rank shows up here
    comm_.all_reduce_scalars(sums.data(), sums.size(), ReduceOp::Sum);
  }
  pair_id_sum = sums[N];
  stop = sums[N + 1] > 0;
  SetStats st;
  st.all = PairStats::from_sums(sums.data());
  for (size_t g = 0; g < sets; ++g)
    st.sets.emplace_back(train_mix_[g].name, PairStats::from_sums(&sums[N + 2 + N * g]));
  take_in_order(ordered, sums.data() + N + 2 + N * sets, st.all, &st.sets);
  return st;
}

int Trainer::train() {
  try {
    return train_loop();
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    const int W = comm_.world();
    std::string more = sharding_advice(cfg_, W) + checkpointing_advice(cfg_);  // each ends in ", "
    if (shard_group_ranks(cfg_, W) == W) more += "more ranks, ";         // (under hybrid sharding they hold no less)
    throw Error(fmt::format("{}: out of memory during training ({}). Memory plan: {}. Lower batch.micro (or "
                            "batch.micro_tokens), or use {}",
                            cfg_.source, e.what(), plan_.describe(), more.substr(0, more.size() - 2)));
  }
}

int Trainer::train_loop() {
  const bool r0 = info_.rank == 0;
  SetStats epoch_stats;  // and each training set's under a mix
  int64_t epoch = -1;
  const int64_t last = cfg_.run.stop_at > 0 ? std::min(cfg_.run.stop_at, total_steps_) : total_steps_;
  int64_t end_step = total_steps_;  // where training ends: earlier after an early stop
  std::optional<EvalStats> stop_eval;  // the evaluation that ended it
  bool early_stopped = early_.exhausted();  // a resumed run that had stopped early: nothing more to train
  if (early_stopped) end_step = start_step_;
  // An evaluation during training (of the starting weights, one owed by the checkpoint resumed from, a periodic
  // one), not cut short: logged, and counted for run.early_stop, which may end training with it.
  std::optional<std::pair<int64_t, EvalStats>> latest_eval;  // the newest recorded, for a save at its step
  auto record_eval = [&](const EvalStats& ev, int64_t step) {
    log_eval(ev, step, false);
    latest_eval.emplace(step, ev);
    if (early_.patience > 0 && early_.record(metric_value(cfg_.run, ev))) {
      early_stopped = true;
      end_step = step;
      stop_eval = ev;  // the weights the run ends with: the final evaluation is this one
    }
  };
  // The weights before any step (not training time: before the clock starts).
  if (cfg_.run.eval_at_start && start_step_ == 0 && test_pairs() > 0) {
    const EvalStats ev = evaluate();
    // Cut short: step_0 is saved, and the resumed run (at step 0) evaluates again.
    if (ev.stopped) return stop_with_checkpoint(0, " (its evaluation of the starting weights cut short)", false);
    record_eval(ev, 0);
  }
  const double t_start = now();
  double tokens_total = 0;
  int64_t skipped = 0;
  bool save_owed = false;  // a periodic save held back in a streak of skipped steps, made at the next one that trains
  StepTimes times_total;  // rank 0's step-time breakdown over the train steps, and their wall time
  double step_s_total = 0;
  // One record per finished epoch (an epoch cut by a stop is finished by the resumed run; its record then
  // covers the steps that run made). `step` is the steps done when it finished.
  auto end_epoch = [&](int64_t steps_done) {
    if (epoch < 0 || epoch_stats.all.pairs == 0) return;
    nlohmann::json j = epoch_stats.to_json(/*with_tokens=*/true);
    j["type"] = "epoch";
    j["epoch"] = epoch;
    j["step"] = steps_done;
    metrics_->write(j);
    const PairStats& e = epoch_stats.all;
    if (r0)
      printf("epoch %lld done | train loss %.4f | train acc %.3f | margin %.4f\n%s", (long long)epoch, e.loss(),
             e.accuracy(), e.chosen() - e.rejected(), epoch_stats.sets_text().c_str());
    epoch_stats = {};
  };
  // A stop came at an evaluation step before its evaluation ended: it runs now, as in the uninterrupted run, and
  // the checkpoint resumed from gets it (run.keep_best, and run.early_stop's count, as saved after it).
  if (eval_owed_ && start_step_ < total_steps_) {
    const EvalStats ev = evaluate();
    if (ev.stopped) return stop_with_checkpoint(start_step_, " (its evaluation cut short, not recorded)", true);
    record_eval(ev, start_step_);
    pay_owed_eval(start_step_, ev);
  }
  for (int64_t s = start_step_; s < last && !early_stopped; ++s) {
    const double t0 = now();
    stack_.clock->discard();  // what ran since the last step (checkpoint loads, say) is not this step's
    data::StepPlan plan = sampler_->next_step();
    if (plan.epoch != epoch) {
      end_epoch(s);
      epoch = plan.epoch;
    }
    StepResult res;
    double pair_id_sum = 0;
    bool stop = false;
    const SetStats step_stats = run_train_step(plan, res, pair_id_sum, stop);
    const PairStats& st = step_stats.all;
    const StepTimes times = stack_.clock->take();  // CUDA: waits for the step's last kernels, so dt covers them
    const double dt = now() - t0;
    times_total += times;
    step_s_total += dt;
    epoch_stats.add(step_stats);
    tokens_total += st.tokens;
    skipped += !res.applied;
    skipped_in_a_row_ = res.applied ? 0 : skipped_in_a_row_ + 1;
    const double elapsed = now() - t_start;
    const double eta = elapsed / double(s + 1 - start_step_) * double(total_steps_ - s - 1);
    nlohmann::json j = step_stats.to_json(/*with_tokens=*/true);  // and "sets" under a mix
    j.update({{"type", "train"}, {"step", s + 1}, {"epoch", plan.epoch}, {"grad_norm", res.grad_norm},
              {"lr", res.lr}, {"tokens_per_s", st.tokens / dt}, {"step_s", dt},
              {"applied", res.applied}, {"skipped_total", skipped}, {"pair_id_sum", int64_t(pair_id_sum)},
              {"micro_steps", int64_t(plan.micro.size())}, {"time_s", time_breakdown_json(times, dt)}});
    if (times.device_timed) j["host_time_s"] = host_time_json(times);
    metrics_->write(j);
    if (r0 && (cfg_.run.log_every > 0 && ((s + 1) % cfg_.run.log_every == 0 || s + 1 == total_steps_))) {
      const double mem_mib = double(stack_.engine->memory_report().live_total) / (1 << 20);
      printf("step %lld/%lld | loss %.4f | acc %.3f | grad-norm %.4f | lr %.3e | tokens/s %.0f | mem %.1f MiB | ETA %s%s\n",
             (long long)(s + 1), (long long)total_steps_, st.loss(), st.accuracy(), res.grad_norm, res.lr,
             st.tokens / dt, mem_mib, format_duration(eta).c_str(),
             res.applied ? "" : fmt::format(" | SKIPPED (non-finite gradient, rank {} group {} tensor {})",
                                            res.bad_rank, res.bad_group, res.bad_tensor).c_str());
      fflush(stdout);
    }
    wait_for_saves(false);
    // Every rank skips the same steps (the engine agrees on it), so every rank stops here alike.
    if (cfg_.optim.max_skipped_steps > 0 && skipped_in_a_row_ >= cfg_.optim.max_skipped_steps)
      stop_diverged(s + 1, res, st.loss());
    // Every rank saw the vote in the same reduction.
    // Its evaluation (periodic, or the final one after the last step) is owed to the resumed run.
    if (stop) return stop_with_checkpoint(s + 1, "", evaluates_at(s + 1) || (s + 1 == total_steps_ && test_pairs() > 0));
    // Evaluate before saving, so the checkpoint carries its step's evaluation (run.keep_best).
    std::optional<EvalStats> ev;
    if (evaluates_at(s + 1)) {
      ev = evaluate();
      if (ev->stopped) return stop_with_checkpoint(s + 1, " (its evaluation cut short, not recorded)", true);
      record_eval(*ev, s + 1);
    }
    if (((cfg_.run.save_every > 0 && (s + 1) % cfg_.run.save_every == 0) || save_owed) && s + 1 < total_steps_) {
      save_owed = held_back(s + 1);
      if (!save_owed) save_checkpoint(s + 1, ev ? &*ev : nullptr);
    }
  }
  if (early_stopped && r0)
    printf("early stop: eval %s did not improve on %.4f for %lld evaluations; training ends at step %lld of %lld\n",
           best_metric_name(cfg_.run).c_str(), *early_.best, (long long)early_.evals_since_best,
           (long long)end_step, (long long)total_steps_);
  if (!early_stopped && last < total_steps_) {  // stopped early (run.stop_at): save so a later run can resume
    // Not again when saved already: periodically at this step (with its evaluation), or it is the checkpoint
    // this run resumed from (a rerun of the same stop_at). A new save carries the step's evaluation, if any
    // (run.keep_best ranks by it).
    if (last_saved_step_ != last && !held_back(last))
      save_checkpoint(last, latest_eval && latest_eval->first == last ? &latest_eval->second : nullptr);
    wait_for_saves(true);
    if (r0) printf("stopped at step %lld of %lld (run.stop_at)\n", (long long)last, (long long)total_steps_);
    return 0;
  }
  end_epoch(end_step);
  const double t_eval = now();
  std::optional<EvalStats> ev;
  if (test_pairs() > 0) {
    ev = stop_eval ? stop_eval : evaluate();
    // Training is done; a slow final evaluation must not outlast the grace before SIGKILL. The resumed run
    // (at its last step) runs only the evaluation.
    if (ev->stopped) return stop_with_checkpoint(end_step, " (its final evaluation cut short: the resumed run evaluates)", true);
    log_eval(*ev, end_step, true);
    if (eval_owed_ && start_step_ == end_step) pay_owed_eval(end_step, *ev);  // its checkpoint was saved before it
  }
  const double eval_s = now() - t_eval;  // not training time
  if (cfg_.run.save_final && start_step_ < end_step && last_saved_step_ != end_step)
    save_checkpoint(end_step, ev ? &*ev : nullptr);
  wait_for_saves(true);
  const double elapsed = now() - t_start - eval_s;
  if (r0 && cfg_.run.keep_best != KeepBest::None) {
    if (const auto best = checkpoint::best_checkpoint(ckpt_->paths(), best_metric(cfg_.run)))
      printf("best checkpoint by eval %s: step_%lld (%s %.4f) -> %s\n", best_metric_name(cfg_.run).c_str(),
             (long long)best->first, keep_best_name(cfg_.run.keep_best).c_str(), best->second,
             ckpt_->paths().best_link().c_str());
  }
  // The operating system's high-water mark of each rank (what really was held), the largest of them.
  // On a GPU the device memory is what limits a run: the engine's buffers and the activations at their peak (the
  // tracked allocators', what the memory plan predicts), and what the device has in use (cudaMemGetInfo: the
  // CUDA context and the pool's slack too, and whatever else shares the GPU).
  const bool gpu = cfg_.backend == Backend::Cuda;
  double peaks[3] = {double(peak_resident_bytes()), gpu ? double(stack_.tracked_peak_bytes()) : 0.0,
                     gpu ? double(device_bytes_in_use(cfg_)) : 0.0};
  comm_.all_reduce_scalars(peaks, 3, ReduceOp::Max);
  const double peak_rss = peaks[0];
  nlohmann::json summary = {{"type", "summary"},   {"steps", end_step}, {"seconds", elapsed},
                            {"tokens", tokens_total}, {"tokens_per_s", tokens_total / elapsed},
                            {"world", comm_.world()}, {"skipped_steps", skipped},
                            {"peak_rss_bytes_max_rank", int64_t(peak_rss)},
                            {"train_step_s", step_s_total}, {"time_s", time_breakdown_json(times_total, step_s_total)},
                            {"op_s", op_times_json(times_total)}, {"early_stopped", early_stopped},
                           {"activation_checkpointing", checkpointing_text(cfg_.model, model_cfg_.num_layers)},
                           {"micro_tokens", cfg_.batch.micro_tokens}};  // the budget (auto's choice); 0: pairs
  if (times_total.device_timed) summary["host_time_s"] = host_time_json(times_total);
  if (gpu) summary.update({{"peak_device_bytes_max_rank", int64_t(peaks[1])},
                           {"device_bytes_in_use_max_rank", int64_t(peaks[2])}});
  metrics_->write(summary);
  const std::string device_memory =
      gpu ? fmt::format(", peak device memory {:.1f} MiB tracked ({:.1f} MiB in use on the device; largest rank)",
                        peaks[1] / double(1 << 20), peaks[2] / double(1 << 20))
          : "";
  if (r0 && start_step_ == end_step) {  // resumed at its end (after a stop in the final evaluation): no speed to report
    printf("done: %lld steps; this run resumed at the end, with no step left to train, and evaluated; world %d, peak "
           "RSS %.1f MiB (largest rank)%s\n", (long long)end_step, comm_.world(), peak_rss / (1 << 20),
           device_memory.c_str());
    fflush(stdout);
  } else if (r0) {
    printf("done: %lld steps in %s, %.0f tokens/s over all ranks, world %d, peak RSS %.1f MiB (largest rank)%s\n",
           (long long)end_step, format_duration(elapsed).c_str(), tokens_total / elapsed, comm_.world(),
           peak_rss / (1 << 20), device_memory.c_str());
    printf("time in train steps (rank 0, %s): %s\n", format_duration(step_s_total).c_str(),
           time_shares_line(times_total, step_s_total).c_str());
    if (times_total.device_timed)
      printf("host issuing in train steps (rank 0, inside the scopes): %s\n",
             host_shares_line(times_total, step_s_total).c_str());
    printf("ops in train steps (rank 0, ms a step): %s\n",
           op_times_line(times_total, double(std::max<int64_t>(1, end_step - start_step_))).c_str());
    fflush(stdout);
  }
  export_at_end(end_step);
  return 0;
}

void Trainer::export_at_end(int64_t end_step) {
  if (cfg_.run.export_model == RunExport::None) return;
  const auto slow = slow_phase();  // hashing a rank file of a large checkpoint takes longer than a collective may
  ExportRequest req;
  req.out_dir = export_dir(cfg_.run);
  req.dtype = cfg_.run.export_dtype;
  req.progress_s = cfg_.run.eval_progress_s;
  double step = double(end_step);  // run.export best: rank 0 reads the ranking; every rank learns its step or the error
  if (cfg_.run.export_model == RunExport::Best) {
    checkpoint::run_agreed(comm_, [&] {
      step = 0;
      if (info_.rank != 0) return;
      const auto best = checkpoint::best_checkpoint(ckpt_->paths(), best_metric(cfg_.run));
      ZERO_REQUIRE(best.has_value(), InputError, "{}: run.export best: {} holds no checkpoint ranked by run.keep_best",
                   cfg_.source, ckpt_->paths().root);
      step = double(best->first);
    });
    comm_.all_reduce_scalars(&step, 1, ReduceOp::Sum);
  }
  req.run_dir = ckpt_->paths().step_dir(int64_t(step));
  if (info_.rank == 0)
    printf("pmtrain: run.export %s: %s as an HF model directory\n", export_name(cfg_.run.export_model).c_str(),
           req.run_dir.c_str());
  // Its checksums first, every rank hashing its share of the files at once (not all of them on rank 0: 85 GiB
  // at Qwen3-8B), then rank 0 alone reads the masters and writes the directory.
  const std::string problem = checkpoint::checkpoint_problem_shared(comm_, req.run_dir);
  if (!problem.empty())  // the same on every rank: said once
    checkpoint::rethrow({checkpoint::ErrorKind::Input, fmt::format("{}: run.export: checkpoint {} cannot be exported: "
                                                                   "{}", cfg_.source, req.run_dir, problem)});
  if (info_.rank != 0) return;
  req.verify_checksums = false;
  run_export(req);
}

bool Trainer::held_back(int64_t step) {
  if (skipped_in_a_row_ == 0) return false;
  if (info_.rank == 0) {
    printf("checkpoint: step_%lld held back after %lld skipped step%s in a row (non-finite gradients): a diverging "
           "run's saves would push its sound checkpoints out (run.keep_last)\n",
           (long long)step, (long long)skipped_in_a_row_, skipped_in_a_row_ > 1 ? "s" : "");
    fflush(stdout);
  }
  return true;
}

void Trainer::stop_diverged(int64_t step, const StepResult& res, double loss) {
  wait_for_saves(true);  // every rank is here at the same step: an async save still being written is published
  // The weights after the last step that trained gave the first non-finite gradient: a checkpoint of that step
  // holds them; the sound one to go back to is older.
  const int64_t bad_weights = step - skipped_in_a_row_;
  std::optional<int64_t> older;
  for (const int64_t saved : checkpoint::list_steps(ckpt_->paths()))
    if (saved < bad_weights) older = saved;
  throw ConfigError(fmt::format(
      "{}: {} optimizer steps in a row were skipped for a non-finite gradient (up to step {}; the last on rank {}, "
      "group '{}', tensor '{}'; loss {}): the run has diverged and stops without saving (optim.max_skipped_steps). "
      "The weights after step {} gave the first non-finite gradient; lower optim.lr or check the data, and {}",
      cfg_.source, skipped_in_a_row_, step, res.bad_rank, res.bad_group, res.bad_tensor, loss, bad_weights,
      older ? fmt::format("resume from {}, the newest checkpoint before them", ckpt_->paths().step_dir(*older))
            : std::string("start over: no checkpoint of this run is older")));
}

bool Trainer::evaluates_at(int64_t step) const {
  return cfg_.run.eval_every > 0 && step % cfg_.run.eval_every == 0 && step < total_steps_ && test_pairs() > 0;
}

void Trainer::pay_owed_eval(int64_t step, const EvalStats& ev) {
  nlohmann::json patch = eval_extra(ev);
  patch["eval_owed"] = nullptr;  // merge patch: removed
  if (early_.patience > 0) patch["early_stop"] = early_.to_json();
  const auto slow = slow_phase();
  ckpt_->amend_extra(step, patch);
  eval_owed_ = false;
}

int Trainer::stop_with_checkpoint(int64_t step, const char* cut, bool eval_owed) {
  bool saved = last_saved_step_ == step;  // the checkpoint this run resumed from
  if (!saved && !held_back(step)) {
    save_checkpoint(step, nullptr, eval_owed);
    saved = true;
  }
  wait_for_saves(true);
  if (info_.rank == 0) {  // the resolved config: the run's --set overrides are in it, the config file alone lacks them
    printf("pmtrain: stopped by %s at step %lld of %lld%s; checkpoint %s; resume with: pmtrain train %s --resume auto\n",
           stop_requested() ? stop_signal_name() : "a signal on another rank", (long long)step, (long long)total_steps_,
           cut, saved ? ckpt_->paths().step_dir(step).c_str() : "none (held back: resume goes back to the newest)",
           RunFiles(cfg_.run.dir).resolved_config().c_str());
    fflush(stdout);
  }
  return kExitStopped;
}

void Trainer::log_eval(const EvalStats& ev, int64_t step, bool final) {
  nlohmann::json e = ev.record();
  e.update({{"type", "eval"}, {"step", step}});
  if (final) e["final"] = true;
  metrics_->write(e);
  if (info_.rank == 0) {
    const std::string head = final ? "final eval" : fmt::format("eval @ step {}", step);
    printf("%s | %s\n%s", head.c_str(), ev.summary().c_str(), ev.sets_text().c_str());
    fflush(stdout);
  }
}

bool Trainer::stop_vote() {
  if (!stoppable_) return false;
  double vote = stop_requested() ? 1.0 : 0.0;
  comm_.all_reduce_scalars(&vote, 1, ReduceOp::Max);
  return vote > 0;
}

int64_t Trainer::eval_count(const data::PairDataset& pairs) const {
  return cfg_.run.eval_pairs > 0 ? std::min(cfg_.run.eval_pairs, pairs.num_pairs()) : pairs.num_pairs();
}

int64_t Trainer::test_pairs() const {
  int64_t n = 0;
  for (const TestSet& t : test_sets_) n += t.pairs.num_pairs();
  return n;
}

EvalStats Trainer::evaluate() {
  // Not a train step: its ops stay off the step clock (and out of a device clock's event pool). Its batches
  // are of another size than the steps' (eval_batch_): a device's cached activation blocks of the one kind
  // are given back before the other kind's are made, so the two are never held together.
  stack_.model->ops().set_step_clock(nullptr);
  stack_.engine->set_step_clock(nullptr);
  stack_.model->ops().release_cached_memory();
  struct Retime {
    Trainer& t;
    ~Retime() {
      t.stack_.model->ops().set_step_clock(t.stack_.clock.get());
      t.stack_.engine->set_step_clock(t.stack_.clock.get());
    }
  } retime{*this};
  // Each part on its own batches (the model's sums are read per part), then one reduction for all.
  std::vector<double> sums;
  std::vector<OrderedSums> ordered;  // zero.world_invariant: each set's batches' sums, added in the cut's order
  std::vector<std::vector<data::MicroBatchPlan>> batches;
  EvalProgress progress{Progress(cfg_.run.eval_progress_s)};
  for (const TestSet& t : test_sets_) progress.total += int64_t(batches.emplace_back(eval_batches(t.pairs)).size());
  for (size_t i = 0; i < test_sets_.size(); ++i) {
    const std::optional<PairStats> local =
        evaluate_locally(test_sets_[i].pairs, std::move(batches[i]), ordered.emplace_back(0), progress);
    if (!local) {  // every rank saw the same vote
      EvalStats cut;
      cut.stopped = true;
      return cut;
    }
    const auto local_sums = local->sums();
    sums.insert(sums.end(), local_sums.begin(), local_sums.end());
  }
  for (OrderedSums& o : ordered) sums.insert(sums.end(), o.slots().begin(), o.slots().end());
  comm_.all_reduce_scalars(sums.data(), sums.size(), ReduceOp::Sum);
  EvalStats ev;
  size_t slots_at = PairStats::kNumSums * test_sets_.size();
  for (size_t i = 0; i < test_sets_.size(); ++i) {
    PairStats st = PairStats::from_sums(&sums[PairStats::kNumSums * i]);
    take_in_order(ordered[i], &sums[slots_at], st);
    slots_at += ordered[i].slots().size();
    ev.all.add(st);
    if (!test_sets_[i].name.empty()) ev.sets.emplace_back(test_sets_[i].name, st);
  }
  stack_.model->ops().release_cached_memory();  // the steps' blocks next (not in ~Retime: it may throw)
  ev.runtime_s = progress.clock.elapsed_s();
  return ev;
}

std::vector<data::MicroBatchPlan> Trainer::eval_batches(const data::PairDataset& pairs) const {
  const int W = comm_.world(), R = info_.rank;
  const int64_t n = eval_count(pairs);
  if (n == 0) return {};  // an empty set: no batch on any rank (n is the same on every rank)
  // zero.world_invariant: batches cut as for one rank, then dealt whole (MicroBatchPlan::index: their place in
  // the cut), so each holds the same pairs at any world size and the metrics can be added in the cut's order.
  const bool invariant = cfg_.zero.world_invariant;
  auto deal = [&](std::vector<data::MicroBatchPlan> cut, const std::vector<int64_t>& cost) {
    std::vector<data::StepPlan> plans(static_cast<size_t>(W));
    data::deal_micro_batches(std::move(cut), cost, plans);
    return std::move(plans[size_t(R)].micro);
  };
  if (eval_batch_.tokens > 0) {  // token budgets, longest pairs first (each batch similar lengths)
    const std::vector<int64_t> cost = data::pair_tokens(pairs, batch_cfg_);
    std::vector<int64_t> ids(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = i;
    std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return cost[size_t(a)] > cost[size_t(b)]; });
    std::vector<data::StepPlan> plans(invariant ? 1 : static_cast<size_t>(W));
    data::cut_by_tokens(ids, cost, eval_batch_.tokens, plans);
    if (invariant) return deal(std::move(plans[0].micro), cost);
    return std::move(plans[size_t(R)].micro);
  }
  const int64_t m = eval_batch_.pairs;
  if (invariant) {  // consecutive runs of m pairs
    std::vector<data::MicroBatchPlan> cut(size_t((n + m - 1) / m));
    for (int64_t i = 0; i < n; ++i) cut[size_t(i / m)].pair_ids.push_back(i), cut[size_t(i / m)].pair_mask.push_back(1);
    return deal(std::move(cut), {});
  }
  const int64_t per_rank = (n + W - 1) / W;
  std::vector<data::MicroBatchPlan> batches(size_t((per_rank + m - 1) / m));
  for (size_t b = 0; b < batches.size(); ++b)
    for (int64_t j = 0; j < m; ++j) {
      const int64_t i = (int64_t(b) * m + j) * W + R;  // round-robin over ranks
      if (i < n) batches[b].pair_ids.push_back(i), batches[b].pair_mask.push_back(1);
    }
  return batches;
}

void Trainer::EvalProgress::batch_done(bool print) {
  ++done;
  if (done == total || !clock.due() || !print) return;
  printf("eval: %lld of %lld batches (%.0f%%), %.2f batches/s, ETA %s\n", (long long)done, (long long)total,
         100.0 * double(done) / double(total), double(done) / clock.elapsed_s(),
         clock.eta(double(done) / double(total)).c_str());
  fflush(stdout);
}

std::optional<PairStats> Trainer::evaluate_locally(const data::PairDataset& pairs,
                                                   std::vector<data::MicroBatchPlan> batches, OrderedSums& ordered,
                                                   EvalProgress& progress) {
  int64_t tokens = 0, answer_tokens = 0;
  // The same number of batches on every rank (stage 3 gathers are collective); an empty one runs a
  // masked filler pair.
  std::vector<bool> filler(batches.size(), false);
  bool stopped = false;
  for (size_t b = 0; b < batches.size() && !(stopped = stop_vote()); ++b) {
    data::MicroBatchPlan& mb = batches[b];
    if (mb.pair_ids.empty()) mb.pair_ids.push_back(0), mb.pair_mask.push_back(0), filler[b] = true;
    const data::PairBatch batch = data::make_batch(pairs, mb.pair_ids, mb.pair_mask, batch_cfg_);
    stack_.engine->begin_forward();
    tokens += stack_.model->queue_forward(batch, *stack_.access);  // read back once, below
    answer_tokens += batch.answer_tokens();
    progress.batch_done(info_.rank == 0);
  }
  const std::vector<model::PairStats> each = stack_.model->ops().take_pair_stats_each();  // one per batch
  if (stopped) return std::nullopt;
  if (cfg_.zero.world_invariant) {
    ordered = OrderedSums(batches.size() * size_t(comm_.world()));
    for (size_t b = 0; b < batches.size(); ++b)
      if (!filler[b]) ordered.put(batches[b].index, each.at(b));
  }
  return PairStats::of(model::PairStats::sum(each), tokens, answer_tokens);
}

}  // namespace zero::pmtrain
