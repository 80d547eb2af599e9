// The model FLOPs of a training step and MFU, as the GPU-speed issue defines them (PaLM-style: the matmul
// FLOPs the model needs, not what a kernel does; a recomputed forward under checkpointing is not counted):
//   flops = 6 x non-embedding parameters x tokens + 6 x layers x heads x head_dim x seq x tokens
//   MFU   = flops / (seconds x peak FLOP/s)
// bench/torch/hf_reward_baseline.py writes the same formula in Python for the transformers side, so both
// columns of bench/gpu/speed.sh's table divide the same numerator. `pmtrain plan` predicts time from a
// different count (the FLOPs executed: causal attention as n(n+1)/2 scores, recomputation), so it keeps its own.
#pragma once
#include <cstdint>
#include <vector>

#include "model/param_access.h"
#include "model/qwen3_config.h"

namespace zero::pmtrain {

// Every parameter but the token embedding (decoder layers, final norm, score head), counted from the
// model's groups (HF's model.embed_tokens.weight is the one left out).
int64_t non_embedding_params(const std::vector<model::GroupSpec>& groups);

// Model FLOPs of training (forward and backward) on `tokens` tokens in sequences of `seq` tokens.
double training_model_flops(const model::Qwen3Config& qc, int64_t non_embedding_params, int64_t seq, double tokens);

// Model FLOPs utilisation: flops done in `seconds` against `devices` x peak_tflops x 1e12 FLOP/s.
double model_flops_utilisation(double flops, double seconds, double peak_tflops, int devices);

}  // namespace zero::pmtrain
