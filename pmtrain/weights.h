// Which weights `pmtrain eval` and `pmtrain score` use, and (for score) loading them without MPI:
//   - a run's checkpoint: --checkpoint PATH (a step_<N> directory, or a run directory: its newest), else
//     by default the newest complete checkpoint of the config's run.dir;
//   - an exported HF model directory: --model DIR;
//   - the config's initial weights (random init, or model.hf_dir): --init, never by default, so an
//     untrained model is not evaluated by accident.
#pragma once
#include <memory>
#include <string>

#include "checkpoint/manifest.h"
#include "model/param_access.h"
#include "model/qwen3_config.h"
#include "pmtrain/config.h"

namespace zero::pmtrain {

struct WeightsArgs {  // the command-line options (at most one set)
  std::string checkpoint;
  std::string model;
  bool init = false;
};

struct WeightsChoice {
  enum class Kind { Checkpoint, HfDir, Init } kind = Kind::Init;
  std::string path;         // absolute: the step_<N> directory or the HF directory (unused for Init)
  std::string description;  // what the command's first line says, e.g. "checkpoint /r/checkpoints/step_10 (step 10)"
};

// Resolves the options against the config (paths already absolute, see paths.h). ConfigError when the
// default run directory has no complete checkpoint, naming it and the other choices.
WeightsChoice choose_weights(const WeightsArgs& args, const Config& cfg);

// The model shape a pmtrain checkpoint records (trainer.extra.model_config); InputError naming the
// manifest when the checkpoint was not written by pmtrain train.
model::Qwen3Config checkpoint_model_config(const checkpoint::Manifest& m, const std::string& checkpoint_dir);

// A string the trainer stored in trainer.extra (e.g. "tokenizer"); "" when absent or not a string.
std::string trainer_extra_string(const checkpoint::Manifest& m, const char* key);

struct ScoringModel {
  model::Qwen3Config config;
  std::unique_ptr<model::DenseParams> params;
  std::string tokenizer;  // the tokenizer that goes with these weights (cfg.data.tokenizer when they name none)
};

// Full fp32 weights in this process (one tensor read at a time from a checkpoint).
ScoringModel load_scoring_model(const WeightsChoice& w, const Config& cfg);

}  // namespace zero::pmtrain
