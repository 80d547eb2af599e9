// Which Qwen3 shape a run trains: an HF directory's config.json, a named preset, or a custom shape;
// and how its parameters get their first values (HF weights streamed tensor by tensor, or random init).
#pragma once
#include "model/param_access.h"
#include "model/qwen3_config.h"
#include "model/reward_model.h"
#include "pmtrain/config.h"
#include "zero/engine.h"

namespace zero::pmtrain {

// The Qwen3 architecture for this config; vocab_size 0 means the tokenizer's size (`tokenizer_vocab`).
model::Qwen3Config resolve_model_config(const ModelSection& m, int64_t tokenizer_vocab);
// The model's options from the model and loss sections (checkpointing, decay flags, model.attention, the
// loss's centering), for training, planning and scoring alike.
model::RewardModelOptions reward_model_options(const Config& cfg);

// Fills the engine's parameters: from model.hf_dir when set (streamed), else a seeded random init drawn on
// `threads` host threads (the config's `threads`; the numbers do not depend on it).
// Returns a one-line description for the log.
std::string init_model_parameters(Engine& engine, const ModelSection& m, const model::Qwen3Config& qc,
                                  const std::vector<model::GroupSpec>& groups, int threads);

}  // namespace zero::pmtrain
