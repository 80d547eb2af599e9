#include "pmtrain/config.h"

#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <type_traits>

#include "comm/launch_env.h"
#include "core/check.h"
#include "pmtrain/choice.h"
#include "pmtrain/engine_assembly.h"

namespace zero::pmtrain {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The values a numeric key accepts: lo..hi, each end included or not. Printed as the user would read
// it in an error ("> 0", "in [0, 1)").
struct Range {
  double lo = -kInf, hi = kInf;
  bool lo_included = true, hi_included = true;

  bool contains(double v) const {  // false for NaN
    return (lo_included ? v >= lo : v > lo) && (hi_included ? v <= hi : v < hi);
  }
  std::string describe() const {
    if (std::isinf(hi)) return fmt::format("{} {}", lo_included ? ">=" : ">", lo);
    return fmt::format("in {}{}, {}{}", lo_included ? '[' : '(', lo, hi, hi_included ? ']' : ')');
  }
};
constexpr Range kPositive{0, kInf, false};
constexpr Range kNonNegative{0, kInf};
constexpr Range kAtLeastOne{1, kInf};
constexpr Range kUnit{0, 1};                   // [0, 1]
constexpr Range kBelowOne{0, 1, true, false};  // [0, 1): Adam betas

// The spellings of each enum-valued key: the one parse (pick) and the one way back to text.
const Choices<Backend> kBackends{{"cpu", Backend::Cpu}, {"cuda", Backend::Cuda}};
const Choices<ModelPreset> kPresets{{"tiny", ModelPreset::Tiny},           {"qwen3-0.6b", ModelPreset::Qwen3_0_6B},
                                    {"qwen3-1.7b", ModelPreset::Qwen3_1_7B}, {"qwen3-4b", ModelPreset::Qwen3_4B},
                                    {"qwen3-8b", ModelPreset::Qwen3_8B},     {"custom", ModelPreset::Custom}};
const Choices<model::AttentionKind> kAttention{
    {"auto", model::AttentionKind::Auto},
    {"flash", model::AttentionKind::Flash},
    {"reference", model::AttentionKind::Reference},
    {"flash_fma", model::AttentionKind::FlashFma},
    {"flash_wide", model::AttentionKind::FlashWide}};
// model.activation_checkpointing: auto (no mode: the run chooses, ModelSection::checkpointing_auto) or a mode.
const Choices<std::optional<model::ActivationCheckpointing>> kCheckpointing{
    {"auto", std::nullopt},
    {"none", model::ActivationCheckpointing::None},
    {"selective", model::ActivationCheckpointing::Selective},
    {"full", model::ActivationCheckpointing::Full}};
const Choices<KeepBest> kKeepBest{{"none", KeepBest::None}, {"loss", KeepBest::Loss}, {"accuracy", KeepBest::Accuracy}};
const Choices<RunExport> kRunExports{{"none", RunExport::None}, {"final", RunExport::Final}, {"best", RunExport::Best}};
const Choices<StepClockKind> kStepClocks{{"device", StepClockKind::Device}, {"host", StepClockKind::Host}};
const Choices<DType> kExportDTypes{{"bf16", DType::BF16}, {"fp32", DType::F32}};
const Choices<data::TextMode> kTextModes{{"raw", data::TextMode::Raw}, {"chat", data::TextMode::Chat}};
const Choices<data::TooLongPolicy> kTooLong{{"truncate", data::TooLongPolicy::TruncateKeepEnd},
                                            {"truncate_keep_start", data::TooLongPolicy::TruncateKeepStart},
                                            {"drop", data::TooLongPolicy::Drop}};
const Choices<data::BadLinePolicy> kBadLines{{"skip", data::BadLinePolicy::Skip}, {"fail", data::BadLinePolicy::Fail}};
const Choices<data::BatchLayout> kLayouts{{"padded", data::BatchLayout::Padded}, {"packed", data::BatchLayout::Packed}};
const Choices<data::RemainderPolicy> kRemainders{{"drop", data::RemainderPolicy::Drop}, {"pad", data::RemainderPolicy::Pad}};
// fp16 is a dtype the engine knows but cannot reduce in yet; it says so (with the reason) when it starts.
const Choices<DType> kDTypes{{"fp32", DType::F32}, {"bf16", DType::BF16}, {"fp16", DType::F16}};
const Choices<std::optional<DType>> kAccumDTypes{
    {"auto", std::nullopt}, {"fp32", DType::F32}, {"bf16", DType::BF16}, {"fp16", DType::F16}};
// zero.master: whether the fp32 master is split (EngineConfig::split_master); auto = split under bf16 params.
const Choices<std::optional<bool>> kMasters{{"auto", std::nullopt}, {"fp32", false}, {"split", true}};
// zero.offload: what lives in host memory (EngineConfig::offload_optimizer).
const Choices<bool> kOffloads{{"none", false}, {"optimizer", true}};
const Choices<optim::ScheduleKind> kSchedules = optim::schedule_names();

// One config key: how to read it from YAML, how to print it back, the values it accepts (numeric keys
// with a range, enum keys their spellings), what it means (docs/CONFIG.md), and where its value last came
// from (for the error when it is out of range).
struct Field {
  std::string key;
  std::function<void(const YAML::Node&)> set;
  std::function<YAML::Node()> get;
  std::string doc;                 // one line: what the key means
  std::string type;                // as docs/CONFIG.md names it
  std::string accepted;            // the spellings of an enum key ("" for others)
  std::optional<Range> range;
  std::function<double()> number;  // the value as a double, for the range check
  std::string origin;              // "file:line" or "--set"; empty while it holds its default
  // A null value (`key:`, `key: ~`, `--set key=`) is an error, not the string "null", except for a key
  // that reads it as empty (null_ok). A string key takes "" only where its doc says what "" means.
  bool null_ok = false;
  bool empty_ok = false;
};

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_integral_v<T>) return "integer";
  else if constexpr (std::is_floating_point_v<T>) return "number";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return "list of strings";
  else if constexpr (std::is_same_v<T, std::map<std::string, std::vector<std::string>>>) return "map of name: list of strings";
  else if constexpr (std::is_same_v<T, std::map<std::string, double>>) return "map of name: number";
  else return "string";
}

// A double prints as the shortest text that reads back to it (3.0e-3 -> 0.003), not yaml-cpp's 17
// digits (0.0030000000000000001).
template <class T>
YAML::Node to_node(const T& v) {
  if constexpr (std::is_same_v<T, double>) {
    char buf[32];
    return YAML::Node(std::string(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr));
  } else {
    return YAML::Node(v);
  }
}

template <class T>
Field field(std::string key, T& ref, std::string doc) {
  Field f;
  f.key = std::move(key);
  f.set = [&ref](const YAML::Node& n) {
    const T v = n.as<T>();
    // yaml-cpp reads .inf, -.inf and .nan (though not inf or nan), and .inf passes a range like "> 0":
    // no key means anything by a non-finite number, so each is refused as "inf" is.
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(v)) throw YAML::BadConversion(n.Mark());
    ref = v;
  };
  f.get = [&ref] { return to_node(ref); };
  f.doc = std::move(doc);
  f.type = type_name<T>();
  return f;
}

template <class T>
  requires std::is_arithmetic_v<T>
Field field(std::string key, T& ref, Range range, std::string doc) {
  Field f = field(std::move(key), ref, std::move(doc));
  f.range = range;
  f.number = [&ref] { return double(ref); };
  return f;
}

// A string key whose doc says what "" means (none, the default, ...): an explicit "" is a value.
Field empty_means(Field f) {
  f.empty_ok = true;
  return f;
}

// An enum-valued key: parsed by pick() as it is read, so a bad value stops the load with its line.
template <class E>
Field choice(std::string key, E& ref, const Choices<E>& options, std::string doc) {
  Field f;
  f.key = std::move(key);
  f.set = [&ref, &options, k = f.key](const YAML::Node& n) { ref = pick(k, n.as<std::string>(), options); };
  f.get = [&ref, &options] { return YAML::Node(choice_name(ref, options)); };
  f.doc = std::move(doc);
  f.type = "enum";
  f.accepted = choice_names(options, " | ");
  return f;
}

// An enum key that was a bool once: a YAML boolean (true/false, yes/no, on/off) still reads, as
// if_true / if_false, so the configs written for the bool keep working.
template <class E>
Field choice_or_bool(std::string key, E& ref, const Choices<E>& options, E if_true, E if_false, std::string doc) {
  Field f = choice(std::move(key), ref, options, std::move(doc));
  f.set = [&ref, &options, if_true, if_false, k = f.key](const YAML::Node& n) {
    bool b = false;
    ref = YAML::convert<bool>::decode(n, b) ? (b ? if_true : if_false) : pick(k, n.as<std::string>(), options);
  };
  f.accepted += fmt::format(" (or true = {}, false = {})", choice_name(if_true, options), choice_name(if_false, options));
  return f;
}

// model.activation_checkpointing: a mode, or auto (ModelSection::checkpointing_auto: full until the run
// resolves it), written back as auto once resolved. A YAML boolean reads as full / none (it was a bool once).
Field checkpointing_field(ModelSection& m) {
  Field f;
  f.key = "model.activation_checkpointing";
  f.set = [&m, k = f.key](const YAML::Node& n) {
    bool b = false;
    const std::optional<model::ActivationCheckpointing> mode =
        YAML::convert<bool>::decode(n, b) ? (b ? model::ActivationCheckpointing::Full : model::ActivationCheckpointing::None)
                                          : pick(k, n.as<std::string>(), kCheckpointing);
    m.checkpointing_auto = !mode;
    m.activation_checkpointing = mode.value_or(model::ActivationCheckpointing::Full);
  };
  f.get = [&m] {
    return YAML::Node(choice_name(m.checkpointing_auto ? std::nullopt : std::optional(m.activation_checkpointing),
                                  kCheckpointing));
  };
  f.doc = "what a layer keeps for backward: none = everything; selective = all but the element-wise tensors (norm "
          "outputs, q/k after RoPE, the SwiGLU product), rebuilt in backward without repeating a GEMM; full = only its "
          "input and attention output, the rest of the layer recomputed in backward; auto = the least recompute whose "
          "memory plan fits the GPU (or host) with room to spare: none, selective, else full with the most "
          "selective_layers, else full with recompute_attention (chosen at the start and logged; every mode gives the "
          "same bits)";
  f.type = "enum";
  f.accepted = choice_names(kCheckpointing, " | ") + " (or true = full, false = none)";
  return f;
}
// A count (>= 0) or a word that `said` records (zero.shard_ranks `node`, batch.micro_tokens `auto`): the count
// holds `while_word` until the run resolves the word, and the config is written back with the word after that too.
Field count_or_word(std::string key, int64_t& count, bool& said, std::string word, int64_t while_word,
                    const std::string& unit, std::string doc) {
  Field f = field(std::move(key), count, kNonNegative, std::move(doc));
  f.set = [&count, &said, word, while_word, unit, k = f.key](const YAML::Node& n) {
    said = n.IsScalar() && n.Scalar() == word;
    int64_t v = while_word;
    ZERO_REQUIRE(said || YAML::convert<int64_t>::decode(n, v), ConfigError, "key '{}': '{}' is neither a number of {} nor {}",
                 k, YAML::Dump(n), unit, word);
    count = v;
  };
  f.get = [&count, &said, word] { return said ? YAML::Node(word) : to_node(count); };
  f.number = [&count, &said] { return said ? 0.0 : double(count); };
  f.type = "integer or `" + word + "`";
  f.accepted = word;
  return f;
}

// A key that activation_checkpointing: auto sets at the run's start: written back as auto requires it given
// (`unset`: 0, false), not as chosen.
Field resolved_by_auto(Field f, const ModelSection& m, const YAML::Node& unset) {
  f.get = [&m, unset, given = f.get] { return m.checkpointing_auto ? unset : given(); };
  return f;
}

}  // namespace

// A set name is printed in reports and is a JSON key of the eval records.
bool plain_set_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
  });
}

std::string set_names(const std::map<std::string, std::vector<std::string>>& sets) {
  std::string names;
  for (const auto& [name, files] : sets) names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "none" : names;
}

namespace {

// The name of a set in key (data.test_sets, data.train_sets, data.train_weights) is a plain_set_name.
void require_set_name(const std::string& key, const std::string& name) {
  ZERO_REQUIRE(plain_set_name(name), ConfigError, "key '{}': set name '{}' must be letters, digits, '_', '-' or '.'", key,
               name);
}

// A map of named file lists (data.test_sets): plain_set_name names; a set without files is a mistake.
Field named_file_sets(std::string key, std::map<std::string, std::vector<std::string>>& ref, std::string doc) {
  Field f = field(std::move(key), ref, std::move(doc));
  f.null_ok = true;  // `test_sets:` with nothing under it: no sets
  f.set = [&ref, k = f.key](const YAML::Node& n) {
    auto sets = n.IsNull() ? std::map<std::string, std::vector<std::string>>{}
                           : n.as<std::map<std::string, std::vector<std::string>>>();
    for (const auto& [name, files] : sets) {
      require_set_name(k, name);
      ZERO_REQUIRE(!files.empty(), ConfigError, "key '{}': set '{}' has no files", k, name);
    }
    ref = std::move(sets);
  };
  return f;
}

// A map of set names to weights (data.train_weights): plain names, positive finite numbers. That each names a
// data.train_sets set is checked once both are read (check_train_weights).
Field named_weights(std::string key, std::map<std::string, double>& ref, std::string doc) {
  Field f = field(std::move(key), ref, std::move(doc));
  f.null_ok = true;
  f.set = [&ref, k = f.key](const YAML::Node& n) {
    auto weights = n.IsNull() ? std::map<std::string, double>{} : n.as<std::map<std::string, double>>();
    for (const auto& [name, w] : weights) {
      require_set_name(k, name);
      ZERO_REQUIRE(std::isfinite(w) && w > 0, ConfigError, "key '{}': set '{}' has weight {}; a weight is a positive number "
                   "of passes over the set an epoch", k, name, w);
    }
    ref = std::move(weights);
  };
  f.get = [&ref] {
    YAML::Node n(YAML::NodeType::Map);
    for (const auto& [name, w] : ref) n[name] = to_node(w);
    return n;
  };
  return f;
}

void check_train_weights(const Config& c) {
  for (const auto& [name, w] : c.data.train_weights)
    ZERO_REQUIRE(c.data.train_sets.contains(name), ConfigError,
                 "{}: data.train_weights names '{}', which is not a data.train_sets set (the sets: {})", c.source, name,
                 set_names(c.data.train_sets));
}

std::vector<Field> schema(Config& c) {
  auto& r = c.run;
  auto& m = c.model;
  auto& d = c.data;
  auto& b = c.batch;
  auto& z = c.zero;
  auto& o = c.optim;
  auto& l = c.loss;
  // 0 means "derived" or "off" for most counts, so they are only kept from going negative.
  return {
      choice("backend", c.backend, kBackends, "where the model and the engine compute: the CPU (Eigen + MPI) or CUDA GPUs (NCCL)"),
      field("threads", c.threads, kAtLeastOne,
            "math threads per rank (the CPU backend's model math, an offloaded AdamW; the same bits at any count); left "
            "out of the config and --set: OMP_NUM_THREADS when set (its first entry; a Slurm script exports it from "
            "--cpus-per-task), else the rank's share of the node's cores (the CPUs it may run on, at most the node's "
            "cores over its ranks there)"),

      field("run.dir", r.dir, "the run directory: metrics.jsonl, config.resolved.yaml, checkpoints/"),
      field("run.seed", r.seed, "seed of the data order (shuffling and length bucketing)"),
      field("run.steps", r.steps, kNonNegative, "optimizer steps to train; 0 = run.epochs x the steps of one epoch"),
      field("run.epochs", r.epochs, kAtLeastOne, "passes over the training data (when run.steps is 0)"),
      field("run.log_every", r.log_every, kNonNegative, "print a progress line every N steps (0 = never; metrics.jsonl gets every step)"),
      field("run.eval_every", r.eval_every, kNonNegative, "evaluate on the test split every N steps (0 = only at the end)"),
      field("run.eval_at_start", r.eval_at_start, "also evaluate the starting weights before the first step of a fresh run (an eval record at step 0; HF's eval_on_start); run.early_stop counts it"),
      field("run.eval_pairs", r.eval_pairs, kNonNegative, "test pairs an evaluation uses from data.test_files and from each data.test_sets set (0 = all of them)"),
      field("run.eval_progress_s", r.eval_progress_s, kNonNegative, "while an evaluation runs, rank 0 prints its progress (batches done, batches/s, ETA) every this many seconds, `pmtrain score` its own (share of the file read, pairs scored, pairs/s, ETA) on stderr, run.export its own (the checkpoint's checksums, then the weights: bytes done, rate, ETA), and a resume or eval its checkpoint reads (bytes read and hashed by rank 0 so far, rate) (0 = never)"),
      field("run.save_every", r.save_every, kNonNegative, "save a checkpoint every N steps (0 = only at the end)"),
      field("run.save_final", r.save_final, "save a checkpoint after the last step"),
      field("run.keep_last", r.keep_last, kAtLeastOne, "checkpoints kept: the newest N"),
      field("run.keep_every", r.keep_every, kNonNegative, "also keep every checkpoint whose step is a multiple of N (0 = none)"),
      choice("run.keep_best", r.keep_best, kKeepBest, "also keep the checkpoint with the best evaluation at its step (lowest loss or highest accuracy), linked as run.dir/checkpoints/best; every saved step needs an evaluation (run.save_every a multiple of run.eval_every)"),
      empty_means(field("run.keep_best_set", r.keep_best_set, "rank checkpoints (and count run.early_stop) by run.keep_best's metric on this data.test_sets set instead of the whole test split (HF's metric_for_best_model eval_NAME_loss; \"\" = the whole split)")),
      field("run.early_stop", r.early_stop, kNonNegative, "stop training once this many evaluations in a row did not improve run.keep_best's metric (HF's early_stopping_patience; 0 = never); the run ends as if finished there"),
      choice("run.export", r.export_model, kRunExports, "when training ends, write a checkpoint as an HF model directory (run.export_dir) that transformers loads, as `pmtrain export` does: final = the last step's (needs run.save_final), best = run.keep_best's (HF's load_best_model_at_end); none = no export. A run stopped before its end (a signal, run.stop_at) exports when its resumed run ends"),
      empty_means(field("run.export_dir", r.export_dir, "the directory run.export writes (\"\" = run.dir/hf); a directory that holds anything but an earlier pmtrain export is refused")),
      choice("run.export_dtype", r.export_dtype, kExportDTypes, "dtype of run.export's weights: bf16 (as Qwen3 ships) or fp32 (the masters as they are)"),
      field("run.async_save", r.async_save, "write checkpoints in the background while training goes on"),
      field("run.tensorboard", r.tensorboard, "also write metrics.jsonl's records as a TensorBoard event file in run.dir/tensorboard (`tensorboard --logdir RUN_DIR`; HF's report_to tensorboard): every number of each train, eval and epoch record as a scalar at its step (train/loss, eval/sets/NAME/accuracy, train/time_s/gemm, ...), the resolved config as text (the Text tab, tag config) and each of its keys as a hyperparameter (the HParams tab: runs side by side with their keys and metrics; HF logs its arguments so), rebuilt from metrics.jsonl when a run resumes, so no step shows twice"),
      empty_means(field("run.resume", r.resume, "\"\" = start fresh, auto = the newest complete checkpoint of run.dir, or a checkpoint path")),
      field("run.start_over", r.start_over, "train from scratch in a run.dir that already holds checkpoints: removes them and its metrics.jsonl once the run is set up (without it such a run is refused)"),
      field("run.stop_at", r.stop_at, kNonNegative, "stop after this step as if interrupted (the schedule still spans every step; 0 = off)"),
      field("run.collective_timeout_s", r.collective_timeout_s, kNonNegative,
            "seconds a rank waits for a peer at a collective before naming it and ending the job (0 = forever)"),
      field("run.slow_phase_timeout_s", r.slow_phase_timeout_s, kNonNegative,
            "the same wait during set-up, data loading and checkpoint I/O (0 = forever)"),
      choice("run.step_clock", r.step_clock, kStepClocks,
             "how a GPU times the step-time breakdown (the `time in train steps` line, metrics.jsonl's time_s, "
             "`pmtrain bench`'s ops): device = an event on the compute stream at each boundary of every op's and "
             "engine phase's scope (the stream's time by category and op, the host's time issuing it beside it); "
             "host = the host's clock alone, no events (each scope's time issuing its work, the rest of the step "
             "counted as other): a run of each tells what the events cost. The CPU backend times on the host "
             "either way"),

      empty_means(field("model.hf_dir", m.hf_dir, "import config.json + safetensors from this HF directory (\"\" = random init)")),
      choice("model.preset", m.preset, kPresets, "random-init shape: a Qwen3 size, tiny (the CPU default) or custom (only the keys below)"),
      field("model.vocab_size", m.vocab_size, kNonNegative, "vocabulary rows (0 = the preset's, else the tokenizer's size)"),
      field("model.hidden_size", m.hidden_size, kNonNegative, "overrides the preset's hidden size (0 = the preset's)"),
      field("model.intermediate_size", m.intermediate_size, kNonNegative, "overrides the preset's MLP width (0 = the preset's)"),
      field("model.num_layers", m.num_layers, kNonNegative, "overrides the preset's decoder layers (0 = the preset's)"),
      field("model.num_heads", m.num_heads, kNonNegative, "overrides the preset's attention heads (0 = the preset's)"),
      field("model.num_kv_heads", m.num_kv_heads, kNonNegative, "overrides the preset's key/value heads (0 = the preset's)"),
      field("model.head_dim", m.head_dim, kNonNegative, "overrides the preset's head dimension (0 = the preset's)"),
      field("model.rope_theta", m.rope_theta, kNonNegative, "RoPE base (0 = the preset's)"),
      field("model.rms_norm_eps", m.rms_norm_eps, kPositive, "RMSNorm epsilon of a random-init model"),
      field("model.init_seed", m.init_seed, "seed of the random init (and of a new score head on imported weights)"),
      checkpointing_field(m),
      resolved_by_auto(field("model.selective_layers", m.selective_layers, kNonNegative,
            "with activation_checkpointing full: the last N layers checkpoint selectively instead (their GEMMs are not "
            "recomputed): less recompute for more memory; `pmtrain plan` shows what fits"), m, YAML::Node(0)),
      resolved_by_auto(field("model.recompute_attention", m.recompute_attention,
            "with activation_checkpointing full: recompute each layer's attention forward in backward too instead of "
            "keeping its output and log-sum-exp (rows x (q_dim x 2 + heads x 4) bytes a layer on a GPU): the least "
            "memory; auto turns it on only when nothing else fits"), m, YAML::Node(false)),
      choice("model.attention", m.attention, kAttention, "attention kernel: auto = reference on the CPU, flash on a GPU (tensor cores in bf16); flash_fma = flash on the GPU's fp32-FMA kernels only; flash_wide = flash with the GPU's wide tensor-core kernels (128-row blocks, the same bits as flash) where the tensor cores apply"),
      field("model.decay_norms", m.decay_norms, "apply weight decay to the norm weights"),
      field("model.decay_embedding", m.decay_embedding, "apply weight decay to the embedding"),

      field("data.tokenizer", d.tokenizer, "tokenizer.json (Qwen2/Qwen3 byte-level BPE)"),
      field("data.train_files", d.train_files, "training pairs: .jsonl or .jsonl.gz files or globs"),
      named_file_sets("data.train_sets", d.train_sets, "named training sets, name: [files or globs]: with data.train_files they make the training split, each set weighted by data.train_weights, its training loss and accuracy logged on their own (\"sets\" in metrics.jsonl's train and epoch records)"),
      named_weights("data.train_weights", d.train_weights, "passes over each data.train_sets set an epoch, name: weight (default 1; open-instruct's dataset_mixer, OpenRLHF's dataset_probs, but counted, not drawn): 2 = each pair twice an epoch; 0.5 = half its pairs, the other half the next epoch (a fixed shuffle of the set, taken a window at a time); data.train_files count once"),
      field("data.test_files", d.test_files, "test pairs for evaluation (empty = no evaluation)"),
      named_file_sets("data.test_sets", d.test_sets, "named test sets, name: [files or globs] (HF's dict of eval datasets): each is evaluated and reported on its own (metrics.jsonl: the eval record's \"sets\"), and with data.test_files they make the test split that run.keep_best and run.early_stop read"),
      field("data.max_train_pairs", d.max_train_pairs, kNonNegative, "use the first N pairs of the training split, data.train_files then data.train_sets (0 = all)"),
      empty_means(field("data.prompt_field", d.prompt_field, "JSON field of a prompt both answers follow (\"\" = none: each answer holds its prompt); a string, or a list of messages")),
      field("data.chosen_field", d.chosen_field, "JSON field of the chosen answer: a string, or a list of {\"role\", \"content\"} messages"),
      field("data.rejected_field", d.rejected_field, "JSON field of the rejected answer: a string, or a list of messages"),
      empty_means(field("data.margin_field", d.margin_field, "JSON field of a per-pair margin, a number the chosen reward should exceed the rejected one by: the loss is -logsigmoid(r_chosen - r_rejected - margin) (TRL's \"margin\" column, Llama 2's margin; \"\" = none)")),
      choice("data.format", d.format, kTextModes, "strings: raw = prompt + answer as it is; chat = prompt + answer read as an hh-rlhf transcript and rendered in the chat template (a plain-text prompt: the user's message, the answer the assistant's). Message lists are always rendered in the chat template"),
      field("data.max_len", d.max_len, kAtLeastOne, "tokens per sequence, the end token included"),
      choice("data.too_long", d.too_long, kTooLong, "a longer sequence: keep its last max_len tokens, its first ones, or drop the pair"),
      choice("data.bad_lines", d.bad_lines, kBadLines, "an unreadable input line: report and skip it, or stop with its file and line"),
      field("data.end_token", d.end_token, "token appended to every sequence (the reward is read there)"),
      choice("data.layout", d.layout, kLayouts, "micro-batch layout: padded rows, or sequences packed back to back (only real tokens computed)"),
      field("data.pad_to", d.pad_to, kAtLeastOne, "rows are a multiple of N tokens long"),
      field("data.pack_row_len", d.pack_row_len, kNonNegative, "packed layout: row capacity in tokens (0, or less than the longest pair: the longest pair)"),
      field("data.share_prompt", d.share_prompt, "packed layout: the first tokens a pair's two answers have in common (the prompt) are stored and computed once; the rejected answer attends to them and not to the chosen one, so rewards are those of the answers alone (hh-rlhf: about a third fewer tokens)"),
      field("data.bucket_by_length", d.bucket_by_length, "group pairs of similar length into the same micro-batches"),
      field("data.shuffle", d.shuffle, "shuffle the pairs every epoch (seeded by run.seed)"),
      choice("data.remainder", d.remainder, kRemainders, "the last partial batch of an epoch: drop it, or pad it with masked pairs"),
      empty_means(field("data.cache_dir", d.cache_dir, "tokenized dataset cache (\"\" = $XDG_CACHE_HOME/pmtrain, else ~/.cache/pmtrain)")),

      field("batch.global", b.global, kNonNegative, "pairs per optimizer step over all ranks (global = micro x accum x world; 0 = derived)"),
      field("batch.micro", b.micro, kNonNegative, "pairs per micro-batch per rank (0 = derived)"),
      field("batch.accum", b.accum, kNonNegative, "micro-batches per rank per step (0 = derived)"),
      field("batch.world", b.world, kNonNegative, "pin the world size the batch is planned for (0 = whatever the launcher starts)"),
      count_or_word("batch.micro_tokens", b.micro_tokens, b.micro_tokens_auto, "auto", 0, "tokens", "> 0: micro-batches filled to this many tokens per rank instead of batch.micro pairs (evaluation batches too: batch.eval_micro_tokens); auto = the most whose memory plan fits the GPU (or host) with room to spare, from one pair at data.max_len up to the rank's whole share of a step at max_len (chosen at the start, after model.activation_checkpointing auto, and logged; evaluation batches and batch.eval_micro_tokens 0 as for one pair at max_len; not with zero.world_invariant)"),
      field("batch.eval_micro", b.eval_micro, kNonNegative, "pairs per evaluation batch per rank (HF's per_device_eval_batch_size; also `pmtrain score`'s forward passes; with no training batch, 8 pairs when 0); 0 = as many as a forward pass at data.max_len fits in the activation memory planned for a training micro-batch (a forward keeps nothing for a backward: the shipped Qwen3 configs get 3x batch.micro)"),
      field("batch.eval_micro_tokens", b.eval_micro_tokens, kNonNegative, "with batch.micro_tokens: tokens per evaluation batch per rank (and per `pmtrain score` forward pass); 0 = as many as a forward pass fits in the activation memory planned for a training micro-batch"),

      field("zero.stage", z.stage, Range{0, 3}, "ZeRO stage: 0 = replicated, 1 = + sharded optimizer state, 2 = + sharded gradients, 3 = + sharded parameters"),
      field("zero.bucket_elements", z.bucket_elements, kNonNegative, fmt::format("gradient reduction bucket size in elements; 0 = the backend's: {} on the CPU (MPI runs its collectives best at about 1 MiB, and each bucket's send and receive buffers shrink with it), {} on CUDA", kCpuBucketElements, EngineConfig{}.bucket_elements)),
      field("zero.prefetch_depth", z.prefetch_depth, kNonNegative, "stage 3: groups all-gathered ahead of their use"),
      choice("zero.param_dtype", z.param_dtype, kDTypes, "dtype of the parameters the model computes with (masters stay fp32: zero.master)"),
      choice("zero.accum_dtype", z.accum_dtype, kAccumDTypes, "dtype gradients accumulate in across micro-steps; auto = fp32, or the param dtype where nothing is summed (one rank, one micro-step a step, no token budget): the same bits in less memory"),
      choice("zero.reduce_dtype", z.reduce_dtype, kDTypes, "dtype of gradients on the wire: the reductions inside a shard group (all ranks without hybrid sharding) and the replicas' all-reduce of hybrid sharding (zero.shard_ranks), bf16 halving the bytes between nodes"),
      field("zero.world_invariant", z.world_invariant, "the same weights and logged metrics (train and eval loss, accuracy, rewards), bit for bit, at any number of ranks (dividing the step's micro-batches) and any stage, so a run resumed on another world size continues exactly (same backend and device kind; any `threads`): gradients are summed in 64-bit fixed point (exact in any order; 2^-32 resolution, terms under 2^14: a larger one skips the step like a non-finite one) and each micro-batch (and eval batch) is cut from the whole step's pairs (give batch.micro, or batch.micro_tokens), its metrics added in that cut's order. Costs: 8-byte gradient accumulators and wire elements"),
      choice("zero.master", z.master, kMasters, "how the fp32 master weights are kept: fp32 = an array of their own (4 bytes an element), or with fp32 params (no zero.offload) the params themselves, stepped in place; split = as the bf16 params (their high halves, rounded half away from zero) plus their low 16 bits (2 bytes an element, the same fp32 values); auto = split with bf16 params, else fp32 (and fp32 under zero.offload)"),
      count_or_word("zero.shard_ranks", z.shard_ranks, z.shard_ranks_node, "node", ZeroSection::kShardRanksNode, "ranks", "hybrid sharding (FSDP's HYBRID_SHARD): the stage's state is sharded over groups of N consecutive ranks (normally the GPUs of a node) and replicated across the groups; stage 3's gathers and every reduction stay inside a group, and one all-reduce of each rank's gradient shard a step crosses groups, overlapped with the last backward. Memory per rank is that of a world of N ranks. N must divide the world; 0 (or N at least the world) = one group of all ranks; node = the ranks of a node, as launched (every node the same count, placed in blocks of consecutive ranks: srun's default, mpirun --map-by slot; `pmtrain plan` takes its ranks per node, `--dry-run` the launcher's). A run whose groups span nodes says so at its start"),
      choice("zero.offload", z.offload_optimizer, kOffloads, "ZeRO-Offload: optimizer = the fp32 master, m and v (12 bytes a parameter of the rank's shard) in host memory, AdamW run by the rank's `threads` host threads a chunk at a time (the gradients come down, the params go up: PCIe traffic and host time every step); the device keeps the params, the gradient accumulator and the comm buffers. The same bits as without it. none = all on the device"),

      field("optim.lr", o.lr, kPositive, "peak learning rate of AdamW"),
      field("optim.beta1", o.beta1, kBelowOne, "AdamW beta1"),
      field("optim.beta2", o.beta2, kBelowOne, "AdamW beta2"),
      field("optim.eps", o.eps, kPositive, "AdamW epsilon"),
      field("optim.weight_decay", o.weight_decay, kNonNegative, "AdamW decoupled weight decay"),
      choice("optim.schedule", o.schedule, kSchedules, "learning-rate schedule after the warmup"),
      field("optim.warmup_ratio", o.warmup_ratio, kUnit, "linear warmup over this fraction of the steps (when warmup_steps is 0)"),
      field("optim.warmup_steps", o.warmup_steps, kNonNegative, "linear warmup steps (0 = from warmup_ratio)"),
      field("optim.min_lr_ratio", o.min_lr_ratio, kUnit, "the schedule ends at lr x this"),
      field("optim.clip_norm", o.clip_norm, kNonNegative, "clip the global gradient norm to this (0 = no clipping)"),
      field("optim.max_skipped_steps", o.max_skipped_steps, kNonNegative, "stop the run with an error once this many optimizer steps in a row were skipped for a non-finite gradient: it has diverged, and the error names the newest checkpoint older than the weights that diverged. While steps are skipped, periodic and stop checkpoints are held back (made at the next step that trains), so a diverging run does not push its sound ones out (0 = never stop)"),

      field("loss.center_rewards", l.center_rewards, kNonNegative, "reward centering: adds this x mean((r_chosen + r_rejected)^2) to the loss, keeping rewards near 0 (TRL's center_rewards_coefficient; 0.01 is usual; 0 = off)"),
  };
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(const std::string& key, const std::vector<Field>& fields) {
  const std::string leaf = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const Field& f : fields) {
    size_t dist = edit_distance(key, f.key);
    const std::string fleaf = f.key.substr(f.key.rfind('.') == std::string::npos ? 0 : f.key.rfind('.') + 1);
    dist = std::min(dist, edit_distance(leaf, fleaf) + 1);  // right name, wrong section
    if (dist < best_d) best_d = dist, best = f.key;
    // A misnamed section (optimizer: for optim:) matches a section name, often as a prefix either way.
    const std::string section = f.key.substr(0, f.key.find('.'));
    if (key.find('.') == std::string::npos && section != f.key) {
      const bool prefix = key.starts_with(section) || section.starts_with(key);
      const size_t sd = prefix ? 0 : edit_distance(key, section);
      if (sd < best_d) best_d = sd, best = section;
    }
  }
  return best_d <= std::max<size_t>(3, key.size() / 3) ? fmt::format(" (did you mean '{}'?)", best) : "";
}

std::string where(const std::string& source, const YAML::Node& n) {
  const YAML::Mark mk = n.Mark();
  return mk.line >= 0 ? fmt::format("{}:{}", source, mk.line + 1) : source;
}

// yaml-cpp reads a null as the string "null": `run.dir:` would become the directory ./null.
bool has_null_entry(const YAML::Node& n) {
  if (n.IsNull()) return true;
  if (n.IsSequence())
    for (const YAML::Node& item : n)
      if (has_null_entry(item)) return true;
  if (n.IsMap())
    for (const auto& kv : n)
      if (has_null_entry(kv.second)) return true;
  return false;
}

void assign(Field& f, const YAML::Node& value, const std::string& at) {
  const std::string give_empty = f.empty_ok ? " (for an empty one, give \"\")" : "";
  ZERO_REQUIRE(!value.IsNull() || f.null_ok, ConfigError, "{}: key '{}' has no value{}", at, f.key, give_empty);
  ZERO_REQUIRE(value.IsNull() || !has_null_entry(value), ConfigError, "{}: key '{}' has an entry with no value", at, f.key);
  ZERO_REQUIRE(!(f.type == "string" && !f.empty_ok && value.IsScalar() && value.Scalar().empty()), ConfigError,
               "{}: key '{}' has no value", at, f.key);
  try {
    f.set(value);
    f.origin = at;
  } catch (const ConfigError& e) {  // an enum key's unknown value (pick): say where
    throw ConfigError(fmt::format("{}: {}", at, e.what()));
  } catch (const YAML::Exception&) {
    const YAML::Node expect = f.get();
    const std::string expected = expect.IsSequence() ? "a list"
                                 : expect.IsMap() ? (f.type == type_name<std::map<std::string, double>>()
                                                         ? "a mapping like {name: 0.5}"
                                                         : "a mapping like {name: [a.jsonl]}")
                                                  : "a value like '" + YAML::Dump(expect) + "'";
    throw ConfigError(fmt::format("{}: key '{}': cannot use {} here (expected {})", at, f.key,
                                  value.IsScalar() ? "'" + value.Scalar() + "'" : std::string("this value"), expected));
  }
}

// A mapping's key as text: a plain scalar; YAML's complex keys ('? [a, b]: 1', '? {a: 1}: 2') name nothing here.
std::string key_name(const YAML::Node& k, const std::string& source) {
  ZERO_REQUIRE(k.IsScalar(), ConfigError, "{}: a key must be a name, not a {}", where(source, k),
               k.IsSequence() ? "list" : k.IsMap() ? "mapping" : "null");
  return k.Scalar();
}

// yaml-cpp keeps every entry of a mapping, duplicates included, and lookups see only one of them: a key
// given twice is almost always an edit that did not take effect, so it is an error naming both lines.
void reject_duplicate_keys(const YAML::Node& node, const std::string& prefix, const std::string& source) {
  if (node.IsSequence())
    for (const YAML::Node& item : node) reject_duplicate_keys(item, prefix, source);
  if (!node.IsMap()) return;
  std::vector<YAML::Node> seen;
  for (const auto& kv : node) {
    const std::string name = key_name(kv.first, source);
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    for (const YAML::Node& earlier : seen)
      ZERO_REQUIRE(earlier.Scalar() != name, ConfigError, "{}: key '{}' is given twice (lines {} and {})",
                   where(source, kv.first), key, earlier.Mark().line + 1, kv.first.Mark().line + 1);
    seen.push_back(kv.first);
    reject_duplicate_keys(kv.second, key, source);
  }
}

// After the file and the overrides: each numeric key's final value against its range.
void check_ranges(const std::vector<Field>& fields, const std::string& source) {
  for (const Field& f : fields) {
    if (!f.range || f.range->contains(f.number())) continue;
    throw ConfigError(fmt::format("{}: key '{}' is {}; it must be {}", f.origin.empty() ? source : f.origin, f.key,
                                  YAML::Dump(f.get()), f.range->describe()));
  }
}

// "(run.dir, run.seed, ...)": what a section holds, for the error when it is given a value.
std::string section_keys(const std::string& section, const std::vector<Field>& fields) {
  std::vector<std::string> keys;
  for (const Field& f : fields)
    if (f.key.starts_with(section + ".")) keys.push_back(f.key);
  if (keys.size() > 2) keys.resize(2), keys.push_back("...");
  return fmt::format("{}", fmt::join(keys, ", "));
}

void walk(const YAML::Node& node, const std::string& prefix, std::vector<Field>& fields, const std::string& source) {
  for (const auto& kv : node) {
    const std::string name = key_name(kv.first, source);
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
    if (it != fields.end()) {
      assign(*it, kv.second, where(source, kv.first));
      continue;
    }
    const bool is_section = std::any_of(fields.begin(), fields.end(),
                                        [&](const Field& f) { return f.key.rfind(key + ".", 0) == 0; });
    if (is_section && kv.second.IsMap()) {
      walk(kv.second, key, fields, source);
      continue;
    }
    if (is_section && kv.second.IsNull()) continue;  // an empty section
    ZERO_REQUIRE(!is_section, ConfigError, "{}: key '{}' must be a mapping ({}), not {}", where(source, kv.first), key,
                 section_keys(key, fields), kv.second.IsSequence() ? "a list" : "a scalar");
    throw ConfigError(fmt::format("{}: unknown key '{}'{}", where(source, kv.first), key, did_you_mean(key, fields)));
  }
}

// Where each YAML document starts (its '---' line, else its first node), for a file that holds several.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Where the text's documents start: none, one, or where the second starts (a config file holds one). Read with
// yaml-cpp's event parser, not LoadAll: yaml-cpp 0.7's LoadAll never returns on a stream its parser cannot get
// past (a ',' at the top level: an empty document at the same place again and again, each allocated;
// jbeder/yaml-cpp#1040, fixed upstream by #1319 after 0.8). Here a document that starts where the one before it
// did is that, and is malformed YAML at its line. yaml-cpp's ParserException passes through.
std::vector<YAML::Mark> document_starts(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  std::vector<YAML::Mark>& m = starts.marks;
  while (m.size() < 3 && parser.HandleNextDocument(starts)) {
    const size_t n = m.size();
    if (n >= 2 && m[n - 1].pos == m[n - 2].pos)
      throw ConfigError(fmt::format("{}:{}: malformed YAML: nothing can be read past column {} (a ',' outside [ ] "
                                    "or {{ }}?)",
                                    source, m[n - 1].line + 1, m[n - 1].column + 1));
  }
  if (m.size() > 2) m.resize(2);
  return m;
}

// Where `threads` came from (Config::threads_from). Left out of the file and --set: OMP_NUM_THREADS, as OpenMP
// itself and torch take it (a Slurm script sets it from --cpus-per-task; launch/mpi.env sets 1), read through the
// same checks as the key, so a bad value is an error naming the variable. Its first entry: "8,4" is OpenMP's
// nesting, 8 at the outer level.
void resolve_threads(Config& c, std::vector<Field>& fields) {
  Field& threads = *std::find_if(fields.begin(), fields.end(), [](const Field& f) { return f.key == "threads"; });
  if (!threads.origin.empty()) {
    c.threads_from = ThreadsFrom::Config;
    return;
  }
  const std::optional<std::string> omp = read_env(EnvVar::NumThreads);
  if (!omp) return;
  std::string first = omp->substr(0, omp->find(','));
  first.erase(0, first.find_first_not_of(" \t"));
  first.erase(first.find_last_not_of(" \t") + 1);
  if (first.empty()) return;
  const std::string at =
      fmt::format("{}={} (taken as threads, which the config and --set leave out)", env_var_name(EnvVar::NumThreads), *omp);
  assign(threads, YAML::Node(first), at);
  c.threads_from = ThreadsFrom::OmpNumThreads;
}
}  // namespace

Config parse_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides) {
  Config c;
  c.source = source;
  std::vector<Field> fields = schema(c);
  YAML::Node root;
  try {
    // yaml-cpp's Load reads the first document only: a later one ('---') would be dropped without a word.
    const std::vector<YAML::Mark> starts = document_starts(text, source);
    ZERO_REQUIRE(starts.size() <= 1, ConfigError, "{}:{}: a second YAML document starts here; a config file holds one",
                 source, starts.size() > 1 ? starts[1].line + 1 : 0);
    if (!starts.empty()) root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}:{}: malformed YAML: {}", source, e.mark.line + 1, e.msg));
  }
  if (!root.IsNull()) {
    ZERO_REQUIRE(root.IsMap(), ConfigError, "{}: the top level must be a mapping of sections (run:, model:, ...)", source);
    reject_duplicate_keys(root, "", source);
    walk(root, "", fields, source);
  }
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    ZERO_REQUIRE(eq != std::string::npos && eq > 0, ConfigError, "--set '{}': expected key=value", o);
    const std::string key = o.substr(0, eq);
    auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
    const bool is_section = std::any_of(fields.begin(), fields.end(), [&](const Field& f) { return f.key.starts_with(key + "."); });
    ZERO_REQUIRE(!is_section, ConfigError, "--set '{}': key '{}' is a section ({}); set its keys one by one (--set {}.KEY=VALUE)",
                 o, key, section_keys(key, fields), key);
    ZERO_REQUIRE(it != fields.end(), ConfigError, "--set: unknown key '{}'{}", key, did_you_mean(key, fields));
    YAML::Node value;
    try {
      value = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::ParserException& e) {
      throw ConfigError(fmt::format("--set {}: malformed value: {}", key, e.msg));
    }
    assign(*it, value, "--set");
  }
  resolve_threads(c, fields);
  check_ranges(fields, source);
  check_train_weights(c);
  set_provisional_micro_tokens(c);
  return c;
}

void set_provisional_micro_tokens(Config& c) {
  if (c.batch.micro_tokens_auto) c.batch.micro_tokens = token_budget_floor(c.data);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  // A directory opens as a stream that reads nothing: it would load as an empty config.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  ZERO_REQUIRE(st.type() != std::filesystem::file_type::not_found, ConfigError, "{}: no such config file", path);
  ZERO_REQUIRE(!std::filesystem::is_directory(st), ConfigError, "{}: is a directory, not a config file", path);
  std::ifstream in(path);
  ZERO_REQUIRE(in.good(), ConfigError, "{}: cannot read the config file: {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, overrides);
}

std::string to_yaml(const Config& const_c) {
  Config c = const_c;
  YAML::Node root;
  for (const Field& f : schema(c)) {
    const size_t dot = f.key.find('.');
    if (dot == std::string::npos)
      root[f.key] = f.get();
    else
      root[f.key.substr(0, dot)][f.key.substr(dot + 1)] = f.get();
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::pair<std::string, ConfigScalar>> config_scalars(const Config& const_c) {
  Config c = const_c;
  std::vector<std::pair<std::string, ConfigScalar>> out;
  for (const Field& f : schema(c)) {
    const YAML::Node v = f.get();
    double number = 0;
    if (f.type == "bool") {
      out.emplace_back(f.key, v.as<bool>());
    } else if (v.IsScalar() && (f.type.starts_with("integer") || f.type == "number") &&
               YAML::convert<double>::decode(v, number)) {
      out.emplace_back(f.key, number);  // an `integer or auto` key holding auto falls through to text
    } else if (v.IsScalar()) {
      out.emplace_back(f.key, v.as<std::string>());
    } else {
      YAML::Emitter flow;
      flow << YAML::Flow << v;
      out.emplace_back(f.key, std::string(flow.c_str()));
    }
  }
  return out;
}

std::string backend_name(Backend b) { return choice_name(b, kBackends); }
std::string checkpointing_name(model::ActivationCheckpointing mode) {
  return choice_name(std::optional(mode), kCheckpointing);
}
std::string preset_name(ModelPreset preset) { return choice_name(preset, kPresets); }
std::string keep_best_name(KeepBest metric) { return choice_name(metric, kKeepBest); }
std::string export_name(RunExport what) { return choice_name(what, kRunExports); }
DType export_dtype_named(const std::string& key, const std::string& spelling) { return pick(key, spelling, kExportDTypes); }
std::vector<std::string> export_dtype_spellings() {
  std::vector<std::string> names;
  for (const auto& [name, dtype] : kExportDTypes) names.push_back(name);
  return names;
}
std::string export_dir(const RunSection& r) {
  return r.export_dir.empty() ? (std::filesystem::path(r.dir) / "hf").string() : r.export_dir;
}

std::string config_reference_markdown() {
  Config defaults;
  const std::vector<Field> fields = schema(defaults);
  auto cell = [](std::string s) {  // a markdown table cell: a '|' would end it
    std::string out;
    for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return out;
  };
  std::string md =
      "# pmtrain configuration keys\n\n"
      "Generated from the schema table in `pmtrain/config.cpp` by `pmtrain config-doc`; do not edit it by hand. The\n"
      "test `pmtrain_config_doc` fails when this file and the schema differ; regenerate it with\n"
      "`build/pmtrain/pmtrain config-doc > docs/CONFIG.md`.\n\n"
      "A config is a YAML file of these sections; `--set KEY=VALUE` overrides any key with the same checks.\n"
      "Unknown keys (with a did-you-mean), wrong types, values out of range, unknown enum values and keys given\n"
      "twice are errors naming the file and line. `pmtrain train CONFIG --dry-run` prints every key as resolved.\n";
  std::string section = "-";
  for (const Field& f : fields) {
    const size_t dot = f.key.find('.');
    const std::string sec = dot == std::string::npos ? "" : f.key.substr(0, dot);
    if (sec != section) {
      section = sec;
      md += fmt::format("\n## {}\n\n| key | type | default | accepted | meaning |\n|---|---|---|---|---|\n",
                        sec.empty() ? "Top level" : "`" + sec + ":`");
    }
    const YAML::Node v = f.get();
    std::string def = v.IsSequence() && v.size() == 0 ? "[]" : YAML::Dump(v);
    if (def.empty() || (v.IsScalar() && v.Scalar().empty())) def = "\"\"";
    std::string accepted = f.range ? f.range->describe() : f.accepted;
    if (f.range && !f.accepted.empty()) accepted += ", or " + f.accepted;  // a number or a word (zero.shard_ranks)
    md += fmt::format("| `{}` | {} | `{}` | {} | {} |\n", f.key, f.type, cell(def), cell(accepted), cell(f.doc));
  }
  return md;
}

std::vector<std::string> known_keys() {
  Config c;
  std::vector<std::string> keys;
  for (const Field& f : schema(c)) keys.push_back(f.key);
  return keys;
}

}  // namespace zero::pmtrain
