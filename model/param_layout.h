// The Qwen3 reward model's parameter groups (names, shapes, weight-decay flags) in forward order.
#pragma once
#include <string>

#include "model/param_access.h"
#include "model/qwen3_config.h"

namespace zero::model {

// Which parameters take weight decay. torch's default (one param group) decays everything, and the
// fixture's AdamW does too; trainers commonly exempt norms and the embedding.
struct DecayPolicy {
  bool norms = true;      // input/post-attention layernorms, q_norm, k_norm, final norm
  bool embedding = true;  // model.embed_tokens.weight
  // Linear weights and score.weight are always decayed.
};

// Tensor indices inside a decoder-layer group, in HF named_parameters order.
enum LayerTensor : int {
  kQProj = 0, kKProj, kVProj, kOProj, kQNorm, kKNorm, kGateProj, kUpProj, kDownProj, kInputNorm, kPostNorm,
  kLayerTensors
};
// Tensor indices inside the last group.
enum HeadTensor : int { kFinalNorm = 0, kScore = 1, kHeadTensors };

// Group 0 = {model.embed_tokens.weight}; group 1+i = decoder layer i (LayerTensor order);
// last group = {model.norm.weight, score.weight}.
std::vector<GroupSpec> qwen3_rm_groups(const Qwen3Config& c, const DecayPolicy& decay = {});

inline int layer_group(int layer) { return 1 + layer; }
inline int head_group(const Qwen3Config& c) { return 1 + static_cast<int>(c.num_layers); }

}  // namespace zero::model
