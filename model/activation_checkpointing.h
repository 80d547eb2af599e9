// What a decoder layer keeps between forward and backward (model.activation_checkpointing), shared by the
// orchestration (reward_model.cpp, decoder_layer.cpp) and the plan of its memory (activation_plan.h).
#pragma once
#include <cstdint>

namespace zero::model {

// None: every activation backward reads is kept. Selective: the GEMM and attention outputs (q, k, v, o,
// lse, h, g, u) and the rstd vectors are kept; the element-wise tensors computed from them (a, qr, kr,
// b, m) are dropped after forward and recomputed before the layer's backward: no GEMM is repeated, so it
// costs element-wise passes only. Full: each layer's input and its attention output and log-sum-exp
// (o, lse) are kept and the rest of the layer (GEMMs included) is recomputed in backward, all but
// attention's forward (at long sequences it costs as much as a GEMM pass, and o and lse are a small part of
// the layer's activations: rows x (q_dim + heads) elements). With
// recompute_attention (RewardModelOptions, model.recompute_attention) only the input is kept and attention's
// forward runs again too: the least memory. All give the same numbers bit for bit (same inputs, same ops).
enum class ActivationCheckpointing : uint8_t { None, Selective, Full };

// Between full and selective, layer by layer (model.selective_layers): under Full, the last
// `selective_layers` of the `layers` layers are Selective instead, so a budget that holds some layers' GEMM
// outputs recomputes only the rest's GEMMs. The mode of layer `layer`:
constexpr ActivationCheckpointing layer_checkpointing(ActivationCheckpointing mode, int64_t selective_layers,
                                                      int64_t layer, int64_t layers) {
  return mode == ActivationCheckpointing::Full && layer >= layers - selective_layers ? ActivationCheckpointing::Selective
                                                                                    : mode;
}

}  // namespace zero::model
