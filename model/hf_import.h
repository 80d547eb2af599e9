// Import of an HF model directory (config.json + model.safetensors or a sharded index) into the reward
// model's parameters, tensor by tensor, checking every shape against config.json. Tensors the reward model
// does not use (lm_head.weight of an untied causal LM, extra entries) are reported, not loaded.
// score.weight, absent from causal-LM checkpoints, is initialised as HF does for a fresh classifier head:
// normal(0, initializer_range) with a seed (ImportOptions::score_seed), via init_tensor.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/chunks.h"
#include "model/param_access.h"
#include "model/param_layout.h"
#include "model/qwen3_config.h"

namespace zero::model {

struct ImportOptions {
  uint64_t score_seed = 0;  // seed of score.weight when the directory has none
  DecayPolicy decay;        // flags for the returned DenseParams' group specs
  // The part of each tensor to read and hand on (an engine rank's kept range, so a stage-3 rank reads 1/W of
  // the weights); unset: all of it. Shapes are checked whole either way.
  std::function<ElementRange(const TensorSpec&)> elements;
};

struct ImportReport {
  std::vector<std::filesystem::path> files;  // safetensors files read
  std::vector<std::string> loaded;           // from the files
  std::vector<std::string> initialised;      // absent and initialised (score.weight)
  std::vector<std::string> ignored;          // in the files, unused by the reward model
};

// Receives each tensor in group order, a piece at a time: data holds its elements [first, first + size)
// (pieces in order, at most kInitPieceElements each, within ImportOptions::elements); an engine copies only what
// its shard holds.
using TensorSink = std::function<void(const std::string& name, size_t first, std::span<const float> data)>;

// Streams every tensor of `groups` from the directory to `sink` (one piece in memory at a time: its fp32
// values and its bytes in the file).
// InputError, naming the file/tensor, for a missing tensor or a shape that disagrees with `groups`
// (built from config.json: the message gives the expected and the found shape).
ImportReport import_hf_weights(const std::filesystem::path& dir, const Qwen3Config& config,
                               const std::vector<GroupSpec>& groups, const TensorSink& sink,
                               const ImportOptions& options = {});

struct HfRewardModel {
  Qwen3Config config;
  std::unique_ptr<DenseParams> params;
  ImportReport report;
};

// config.json + weights into full fp32 storage (tests, `pmtrain score`).
HfRewardModel load_hf_reward_model(const std::filesystem::path& dir, const ImportOptions& options = {});

}  // namespace zero::model
