// Deterministic random initialisation of the reward model, HF-like: normal(0, initializer_range) for the
// embedding, every linear weight and score.weight; ones for every RMSNorm weight; the pad row of the
// embedding zero (nn.Embedding(padding_idx)). The stream of each tensor depends only on (seed, name),
// so any rank can initialise any tensor alone and get the same numbers.
#pragma once
#include <cstdint>
#include <span>

#include "core/chunks.h"
#include "model/param_access.h"
#include "model/qwen3_config.h"

namespace zero::model {

// Portable normal samples (splitmix64 + Box-Muller, not std::normal_distribution, whose output differs
// between standard libraries). Element pair j draws the generator's calls 2j+1 and 2j+2, so the stream
// can start anywhere: `threads` > 1 fills large spans in pieces at once, the same numbers as one thread
// (a 4B model's ~4e9 samples take about a minute on one core).
// `first` (even): out holds the stream's elements [first, first + out.size()), the same numbers the whole
// stream has there, so a tensor can be made a piece at a time.
void fill_normal(std::span<float> out, double mean, double stddev, uint64_t seed, int threads = 1, size_t first = 0);

// Elements per piece when a tensor is made or imported a piece at a time (init_tensor_range, the HF import,
// pmtrain's engine init): the host memory initialisation needs is one piece, whatever the model's size.
// Even: a piece never splits a pair of the random stream.
inline constexpr size_t kInitPieceElements = size_t(16) << 20;  // 64 MiB of fp32

// fn(first, count) for the pieces that cover elements `want` of a tensor, in order, at most kInitPieceElements
// each, the first starting on the even element at or before want.first (the random stream is drawn in pairs).
template <class F>
void for_each_init_piece(ElementRange want, F&& fn) {
  if (want.count == 0) return;
  const size_t begin = want.first / 2 * 2, end = want.first + want.count;
  for_each_chunk(end - begin, kInitPieceElements, [&](size_t off, size_t count) { fn(begin + off, count); });
}

// Initialises one full tensor of the reward model, identified by its HF name.
void init_tensor(const TensorSpec& spec, const Qwen3Config& c, uint64_t seed, std::span<float> out, int threads = 1);
// Elements [first, first + out.size()) of that tensor (first even), as init_tensor makes them: for
// initialising a large tensor through a small host buffer.
void init_tensor_range(const TensorSpec& spec, const Qwen3Config& c, uint64_t seed, size_t first, std::span<float> out,
                       int threads = 1);

// Initialises every parameter of `params`.
void init_random(DenseParams& params, const Qwen3Config& c, uint64_t seed, int threads = 1);

}  // namespace zero::model
