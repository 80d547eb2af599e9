// pmtrain's run configuration: typed nested structs, parsed once from YAML. Every key is declared in
// one schema table (config.cpp) with its type, its default and, for numeric keys, the values it accepts,
// so unknown keys are errors with a did-you-mean, out-of-range values are errors that give the range,
// `--set a.b=v` overrides go through the same parser, and the resolved config (every default included)
// can be printed and saved. Enum-valued keys are parsed into their enums here, at load (pick(), choice.h),
// so a bad value is reported with its file and line and no later code parses a string again. A knob that
// the engine, the optimizer, the data or the model library also has takes its default from there (one
// default per knob); the defaults written here are pmtrain's own choices. docs/CONFIG.md is generated from
// the schema table (`pmtrain config-doc`).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "data/batch.h"
#include "data/batcher.h"
#include "data/pair_dataset.h"
#include "data/sampler.h"
#include "model/attention.h"
#include "model/param_layout.h"
#include "model/reward_model.h"
#include "optim/lr_schedule.h"
#include "zero/engine_config.h"

namespace zero::pmtrain {

enum class Backend : uint8_t { Cpu, Cuda };
// The named random-init shapes (model_setup.cpp holds each one's sizes); Custom = only the explicit keys.
enum class ModelPreset : uint8_t { Tiny, Qwen3_0_6B, Qwen3_1_7B, Qwen3_4B, Qwen3_8B, Custom };
// run.keep_best: the evaluation metric that picks the checkpoint kept as checkpoints/best.
enum class KeepBest : uint8_t { None, Loss, Accuracy };
// run.export: which checkpoint a finished training run writes as an HF model directory (run.export_dir).
enum class RunExport : uint8_t { None, Final, Best };
// run.step_clock: how a GPU times the step-time breakdown (events on its stream, or the host's clock alone).
enum class StepClockKind : uint8_t { Device, Host };

struct RunSection {
  std::string dir = "runs/default";
  uint64_t seed = 1234;
  int64_t steps = 0;     // optimizer steps; 0 = epochs x steps per epoch
  int64_t epochs = 1;
  int64_t log_every = 1;
  int64_t eval_every = 0;   // 0 = only at the end
  bool eval_at_start = false;  // also evaluate the starting weights (step 0) of a fresh run
  int64_t eval_pairs = 0;   // 0 = the whole test split
  double eval_progress_s = 30;  // rank 0 prints a long evaluation's (and score's) progress this often (0 = never)
  int64_t save_every = 0;   // 0 = only at the end (when checkpoints are on)
  bool save_final = true;
  int64_t keep_last = 2;
  int64_t keep_every = 0;
  KeepBest keep_best = KeepBest::None;  // also keep the best checkpoint by this eval metric
  std::string keep_best_set;            // of this data.test_sets set ("" = the whole test split)
  int64_t early_stop = 0;  // stop after this many evaluations without a better keep_best metric (0 = never)
  RunExport export_model = RunExport::None;  // run.export: at the end of training, this checkpoint as HF
  std::string export_dir;                    // "" = <run.dir>/hf
  DType export_dtype = DType::BF16;          // the exported weights' dtype (bf16 or fp32)
  bool async_save = false;
  bool tensorboard = false;  // also write metrics.jsonl's records as TensorBoard events in <dir>/tensorboard
  std::string resume;       // "", "auto" or a checkpoint path
  bool start_over = false;  // train from scratch in a run.dir holding checkpoints (removes them)
  int64_t stop_at = 0;      // stop after this step as if interrupted (the schedule still spans all steps)
  // A rank that does not reach a collective within this many seconds (dead, stopped) ends the job with a
  // message naming it (exit code 76); 0 = wait forever. Set-up, data loading and checkpoint I/O, where
  // one rank may keep the others waiting long, use slow_phase_timeout_s instead.
  double collective_timeout_s = 60;
  double slow_phase_timeout_s = 1800;
  StepClockKind step_clock = StepClockKind::Device;
};

struct ModelSection {
  std::string hf_dir;       // import config.json + safetensors from here (else random init)
  ModelPreset preset = ModelPreset::Tiny;  // random-init shape (config.cpp: the spellings)
  int64_t vocab_size = 0;   // 0 = the tokenizer's size
  int64_t hidden_size = 0, intermediate_size = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  double rope_theta = 0;    // 0 = the preset's
  double rms_norm_eps = 1e-6;
  uint64_t init_seed = 0;
  model::ActivationCheckpointing activation_checkpointing = model::RewardModelOptions{}.activation_checkpointing;
  int64_t selective_layers = model::RewardModelOptions{}.selective_layers;
  bool recompute_attention = model::RewardModelOptions{}.recompute_attention;
  // activation_checkpointing: auto. Until the run resolves it (resolve_checkpointing, planner.h) the three
  // fields above hold full, 0 and false; then the least recompute whose memory plan fits. The resolved config
  // still says auto, so a resume on other GPUs or world sizes chooses again (every choice gives the same bits).
  bool checkpointing_auto = false;
  model::AttentionKind attention = model::RewardModelOptions{}.attention;  // auto: reference on the CPU, flash on a GPU
  bool decay_norms = model::DecayPolicy{}.norms;
  bool decay_embedding = model::DecayPolicy{}.embedding;
};

struct DataSection {
  std::string tokenizer = "data/assets/qwen3/tokenizer.json";
  std::vector<std::string> train_files;
  std::vector<std::string> test_files;
  // Named test sets (name -> files or globs): each evaluated and reported on its own, and all of them
  // together with test_files make the test split. Names are ordered (std::map): reports list them so.
  std::map<std::string, std::vector<std::string>> test_sets;
  // Named training sets (name -> files or globs), after train_files in the training split, in name order,
  // and their weights (passes an epoch, default 1: data/mix.h).
  std::map<std::string, std::vector<std::string>> train_sets;
  std::map<std::string, double> train_weights;
  int64_t max_train_pairs = 0;  // 0 = all; else the first N pairs of the training split
  std::string prompt_field = data::HhReaderConfig{}.prompt_field;
  std::string chosen_field = data::HhReaderConfig{}.chosen_field;
  std::string rejected_field = data::HhReaderConfig{}.rejected_field;
  std::string margin_field = data::HhReaderConfig{}.margin_field;
  data::TextMode format = data::HhReaderConfig{}.mode;
  int64_t max_len = 512;  // pmtrain's (the data library's 2048 is for long-context use)
  data::TooLongPolicy too_long = data::DataConfig{}.too_long;
  data::BadLinePolicy bad_lines = data::HhReaderConfig{}.bad_lines;
  std::string end_token = data::DataConfig{}.end_token;
  data::BatchLayout layout = data::BatchLayout::Packed;  // pmtrain's: only real tokens are computed
  int64_t pad_to = data::BatchConfig{}.pad_to;
  int64_t pack_row_len = data::BatchConfig{}.pack_row_len;
  bool share_prompt = data::BatchConfig{}.share_prompt;
  bool bucket_by_length = data::SamplerConfig{}.bucket_by_length;
  bool shuffle = data::SamplerConfig{}.shuffle;
  data::RemainderPolicy remainder = data::SamplerConfig{}.remainder;
  std::string cache_dir;                // "" = $XDG_CACHE_HOME/pmtrain, else ~/.cache/pmtrain (paths.h)
};

struct BatchSection {
  int64_t global = 0;  // pairs per optimizer step; any two of global/micro/accum
  int64_t micro = 0;   // pairs per micro-batch per rank
  int64_t accum = 0;
  int64_t world = 0;   // pin the world size (0 = whatever the launcher gives)
  int64_t micro_tokens = 0;  // > 0: micro-batches filled to this many tokens per rank instead of micro
                             // pairs; the global batch stays `global` pairs, the accumulation varies
  // micro_tokens: auto. Until the run resolves it (resolve_micro_tokens, planner.h) micro_tokens holds the
  // least budget (token_budget_floor); then the most tokens whose memory plan fits. The resolved config still
  // says auto, so a resume on other GPUs or world sizes chooses again.
  bool micro_tokens_auto = false;
  int64_t eval_micro = 0;         // pairs per evaluation batch per rank (0 = what the step's activations hold)
  int64_t eval_micro_tokens = 0;  // token budgets: tokens per evaluation batch per rank (0 = as above)
};

struct ZeroSection {
  int64_t stage = 2;  // pmtrain's (the engine's own default is 0, plain data parallelism)
  int64_t bucket_elements = 0;  // 0 = the backend's (pmtrain/engine_assembly.h bucket_elements_for)
  int64_t prefetch_depth = EngineConfig{}.prefetch_depth;
  DType param_dtype = EngineConfig{}.param_dtype;
  std::optional<DType> accum_dtype;  // unset: auto (accum_dtype_for in engine_assembly.h)
  DType reduce_dtype = EngineConfig{}.reduce_dtype;
  std::optional<bool> master;  // split master (EngineConfig::split_master); unset: auto (split under bf16 params)
  bool offload_optimizer = false;  // zero.offload: optimizer (EngineConfig::offload_optimizer)
  // Gradient sums in fixed point and micro-batches composed over the whole step: the same bits at any
  // world size and stage (engine: DType::FX64 sums; sampler: SamplerConfig::world_invariant).
  bool world_invariant = false;
  // Hybrid sharding: the ranks one copy of the sharded state is spread over (a divisor of the world; 0, or
  // the world or more: all of them), or kShardRanksNode (`node`: a node's ranks, until resolve_shard_ranks sets
  // the launch's count; shard_ranks_node then still says it was asked so, and the config is written back so).
  // shard_group_ranks (engine_assembly.h) resolves it.
  static constexpr int64_t kShardRanksNode = -1;
  int64_t shard_ranks = 0;
  bool shard_ranks_node = false;
};

struct OptimSection {
  // Doubles as written (the optimizer's are floats: 1e-5f widened would print as 9.99999974e-06), kept
  // equal to optim::AdamWConfig's defaults (lr: LrSchedule's peak_lr) by pmtrain_config_test.
  double lr = 1e-5;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.0;
  optim::ScheduleKind schedule = optim::ScheduleKind::Cosine;  // pmtrain's
  double warmup_ratio = 0.03;       // of the total steps (used when warmup_steps is 0)
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;
  double clip_norm = 1.0;
  int64_t max_skipped_steps = 20;  // a diverged run (NaN weights skip every step) stops instead of running on
};

struct LossSection {
  double center_rewards = model::RewardModelOptions{}.center_rewards;
};

// Where a config's `threads` came from: the file or --set; else OMP_NUM_THREADS (parse_config reads it, as a Slurm
// script exports it from --cpus-per-task); else, once a command knows its ranks on the node, this rank's share
// of the node's cores (CoreShare: resolve_rank_threads); before that, the default 1.
enum class ThreadsFrom { Default, Config, OmpNumThreads, CoreShare };

struct Config {
  std::string source;   // the YAML file it came from
  Backend backend = Backend::Cpu;
  int64_t threads = 1;  // math threads per rank
  ThreadsFrom threads_from = ThreadsFrom::Default;
  RunSection run;
  ModelSection model;
  DataSection data;
  BatchSection batch;
  ZeroSection zero;
  OptimSection optim;
  LossSection loss;
};

// Parses a YAML file, then applies "--set key=value" overrides (dotted keys), then checks each numeric
// key's final value against its range. Throws ConfigError naming the file, line and key for any problem:
// unknown keys (with a did-you-mean), wrong types, values out of range (with the range), keys given twice.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
Config parse_config(const std::string& yaml_text, const std::string& source, const std::vector<std::string>& overrides = {});
// Every key with its resolved value, as YAML.
std::string to_yaml(const Config& c);
// Every key with its resolved value as one scalar, in to_yaml's order (TensorBoard's hparams): a bool, a
// number (integer and number keys), or text (the other keys; a list or a map as its YAML flow text, "[a, b]").
using ConfigScalar = std::variant<bool, double, std::string>;
std::vector<std::pair<std::string, ConfigScalar>> config_scalars(const Config& c);
// All known dotted keys (for help and did-you-mean).
std::vector<std::string> known_keys();
// A data.test_sets name: letters, digits, '_', '-' or '.' (printed in reports, a JSON key of eval records).
bool plain_set_name(const std::string& name);
// A named-set map's names, in order ("a, b"), or "none": what an error naming a set not among them lists.
std::string set_names(const std::map<std::string, std::vector<std::string>>& sets);
// docs/CONFIG.md: every key with its type, default, accepted values and meaning, from the schema table.
std::string config_reference_markdown();
// The least token budget: one pair at data.max_len, what a budget's memory is planned for at the least
// (a smaller one saves nothing). batch.micro_tokens auto holds it until resolved.
inline int64_t token_budget_floor(const DataSection& d) { return 2 * d.max_len; }
// batch.micro_tokens auto: micro_tokens back to token_budget_floor. parse_config calls it; so does a caller
// that changes data.max_len afterwards (pmtrain bench).
void set_provisional_micro_tokens(Config& c);

// The spelling of an enum value as the config writes it ("cuda", "packed", "bf16", ...).
std::string backend_name(Backend b);
std::string checkpointing_name(model::ActivationCheckpointing mode);
std::string preset_name(ModelPreset preset);
std::string keep_best_name(KeepBest metric);
std::string export_name(RunExport what);

// The dtypes an HF export stores its weights in (run.export_dtype, `pmtrain export --dtype`): the one parse
// of their spellings, and the spellings.
DType export_dtype_named(const std::string& key, const std::string& spelling);
std::vector<std::string> export_dtype_spellings();
// run.export_dir, or <run.dir>/hf when it is empty.
std::string export_dir(const RunSection& r);

}  // namespace zero::pmtrain
