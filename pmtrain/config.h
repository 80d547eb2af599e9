// pmtrain's run configuration: typed nested structs, parsed once from YAML. Every key is declared in
// one schema table (config.cpp) with its type, its default and, for numeric keys, the values it accepts,
// so unknown keys are errors with a did-you-mean, out-of-range values are errors that give the range,
// `--set a.b=v` overrides go through the same parser, and the resolved config (every default included)
// can be printed and saved.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::pmtrain {

struct RunSection {
  std::string dir = "runs/default";
  uint64_t seed = 1234;
  int64_t steps = 0;     // optimizer steps; 0 = epochs x steps per epoch
  int64_t epochs = 1;
  int64_t log_every = 1;
  int64_t eval_every = 0;   // 0 = only at the end
  int64_t eval_pairs = 0;   // 0 = the whole test split
  int64_t save_every = 0;   // 0 = only at the end (when checkpoints are on)
  bool save_final = true;
  int64_t keep_last = 2;
  int64_t keep_every = 0;
  bool async_save = false;
  std::string resume;       // "", "auto" or a checkpoint path
  bool start_over = false;  // train from scratch in a run.dir that already holds checkpoints (kept)
  int64_t stop_at = 0;      // stop after this step as if interrupted (the schedule still spans all steps)
  // A rank that does not reach a collective within this many seconds (dead, stopped) ends the job with a
  // message naming it (exit code 76); 0 = wait forever. Set-up, data loading and checkpoint I/O, where
  // one rank may keep the others waiting long, use slow_phase_timeout_s instead.
  double collective_timeout_s = 60;
  double slow_phase_timeout_s = 1800;
};

struct ModelSection {
  std::string hf_dir;       // import config.json + safetensors from here (else random init)
  std::string preset = "tiny";  // random-init shape: tiny | qwen3-0.6b | qwen3-1.7b | qwen3-4b | qwen3-8b | custom
  int64_t vocab_size = 0;   // 0 = the tokenizer's size
  int64_t hidden_size = 0, intermediate_size = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  double rope_theta = 0;    // 0 = the preset's
  double rms_norm_eps = 1e-6;
  uint64_t init_seed = 0;
  bool activation_checkpointing = false;
  std::string attention = "auto";  // auto | flash | reference (auto: reference on the CPU, flash on a GPU)
  bool decay_norms = true;
  bool decay_embedding = true;
};

struct DataSection {
  std::string tokenizer = "data/assets/qwen3/tokenizer.json";
  std::vector<std::string> train_files;
  std::vector<std::string> test_files;
  int64_t max_train_pairs = 0;  // 0 = all; else the first N pairs of the training files
  std::string chosen_field = "chosen";
  std::string rejected_field = "rejected";
  std::string format = "raw";           // raw | chat
  int64_t max_len = 512;
  std::string too_long = "truncate";    // truncate | truncate_keep_start | drop
  std::string bad_lines = "skip";       // skip | fail
  std::string end_token = "<|im_end|>";
  std::string layout = "packed";        // padded | packed
  int64_t pad_to = 8;
  int64_t pack_row_len = 0;
  bool bucket_by_length = true;
  bool shuffle = true;
  std::string remainder = "drop";       // drop | pad
  std::string cache_dir;                // "" = $XDG_CACHE_HOME/pmtrain, else ~/.cache/pmtrain (paths.h)
};

struct BatchSection {
  int64_t global = 0;  // pairs per optimizer step; any two of global/micro/accum
  int64_t micro = 0;   // pairs per micro-batch per rank
  int64_t accum = 0;
  int64_t world = 0;   // pin the world size (0 = whatever the launcher gives)
  int64_t micro_tokens = 0;  // > 0: micro-batches filled to this many tokens per rank instead of micro
                             // pairs; the global batch stays `global` pairs, the accumulation varies
};

struct ZeroSection {
  int64_t stage = 2;
  int64_t bucket_elements = 1 << 24;
  int64_t prefetch_depth = 1;
  std::string param_dtype = "fp32";
  std::string accum_dtype = "fp32";
  std::string reduce_dtype = "fp32";
};

struct OptimSection {
  double lr = 1e-5;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.0;
  std::string schedule = "cosine";  // constant | linear | cosine
  double warmup_ratio = 0.03;       // of the total steps (used when warmup_steps is 0)
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;
  double clip_norm = 1.0;
};

struct Config {
  std::string source;   // the YAML file it came from
  std::string backend = "cpu";  // cpu | cuda
  int64_t threads = 1;  // math threads per rank
  RunSection run;
  ModelSection model;
  DataSection data;
  BatchSection batch;
  ZeroSection zero;
  OptimSection optim;
};

// Parses a YAML file, then applies "--set key=value" overrides (dotted keys), then checks each numeric
// key's final value against its range. Throws ConfigError naming the file, line and key for any problem:
// unknown keys (with a did-you-mean), wrong types, values out of range (with the range), keys given twice.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
Config parse_config(const std::string& yaml_text, const std::string& source, const std::vector<std::string>& overrides = {});
// Every key with its resolved value, as YAML.
std::string to_yaml(const Config& c);
// All known dotted keys (for help and did-you-mean).
std::vector<std::string> known_keys();

}  // namespace zero::pmtrain
