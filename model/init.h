// Deterministic random initialisation of the reward model, HF-like: normal(0, initializer_range) for the
// embedding, every linear weight and score.weight; ones for every RMSNorm weight; the pad row of the
// embedding zero (nn.Embedding(padding_idx)). The stream of each tensor depends only on (seed, name),
// so any rank can initialise any tensor alone and get the same numbers.
#pragma once
#include <cstdint>
#include <span>

#include "model/param_access.h"
#include "model/qwen3_config.h"

namespace zero::model {

// Portable normal samples (splitmix64 + Box-Muller, not std::normal_distribution, whose output differs
// between standard libraries). Element pair j draws the generator's calls 2j+1 and 2j+2, so the stream
// can start anywhere: `threads` > 1 fills large spans in pieces at once, the same numbers as one thread
// (a 4B model's ~4e9 samples take about a minute on one core).
void fill_normal(std::span<float> out, double mean, double stddev, uint64_t seed, int threads = 1);

// Initialises one full tensor of the reward model, identified by its HF name.
void init_tensor(const TensorSpec& spec, const Qwen3Config& c, uint64_t seed, std::span<float> out, int threads = 1);

// Initialises every parameter of `params`.
void init_random(DenseParams& params, const Qwen3Config& c, uint64_t seed, int threads = 1);

}  // namespace zero::model
