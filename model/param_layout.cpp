// Qwen3 reward-model parameter groups under their HF state-dict names.
#include "model/param_layout.h"

#include <fmt/format.h>

namespace zero::model {

std::vector<GroupSpec> qwen3_rm_groups(const Qwen3Config& c, const DecayPolicy& decay) {
  c.validate();
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  std::vector<GroupSpec> groups;
  // The embedding is the one group the model reads and writes in pieces (the largest: 389M elements on 4B).
  groups.push_back({"embed", {{"model.embed_tokens.weight", {c.vocab_size, H}, decay.embedding}}, true});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    GroupSpec g{fmt::format("layer.{}", l), {}};
    g.tensors = {
        {p + "self_attn.q_proj.weight", {c.q_dim(), H}, true},
        {p + "self_attn.k_proj.weight", {c.kv_dim(), H}, true},
        {p + "self_attn.v_proj.weight", {c.kv_dim(), H}, true},
        {p + "self_attn.o_proj.weight", {H, c.q_dim()}, true},
        {p + "self_attn.q_norm.weight", {D}, decay.norms},
        {p + "self_attn.k_norm.weight", {D}, decay.norms},
        {p + "mlp.gate_proj.weight", {I, H}, true},
        {p + "mlp.up_proj.weight", {I, H}, true},
        {p + "mlp.down_proj.weight", {H, I}, true},
        {p + "input_layernorm.weight", {H}, decay.norms},
        {p + "post_attention_layernorm.weight", {H}, decay.norms},
    };
    groups.push_back(std::move(g));
  }
  groups.push_back({"head", {{"model.norm.weight", {H}, decay.norms}, {"score.weight", {1, H}, true}}});
  return groups;
}

}  // namespace zero::model
