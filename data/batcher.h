// Lays out one micro-batch of whole pairs as a PairBatch (data/batch.h), padded or packed.
//   Padded: one sequence per row, row_len = longest sequence rounded up to pad_to.
//   Packed: whole pairs placed into rows by first-fit decreasing (both sequences of a pair in one row),
//           rows emitted in order so sequence order equals memory order and cu_seqlens is valid;
//           row capacity = max(pack_row_len, longest pair), row_len = fullest row rounded up to pad_to.
//           With share_prompt, a pair's common first tokens (PairDataset::common_prefix) are stored once
//           (data/batch.h's shared).
// Length bucketing happens before this, in the sampler (data/sampler.h).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "data/batch.h"
#include "data/pair_dataset.h"

namespace zero::data {

struct BatchConfig {
  BatchLayout layout = BatchLayout::Padded;
  int64_t pad_to = 8;        // row_len is a multiple of this (tensor-core friendly shapes)
  int64_t pack_row_len = 0;  // packed row capacity in tokens; 0 (or less than the longest pair) = longest pair
  bool share_prompt = true;  // packed: the answers' common first tokens stored and computed once
};

// The first tokens of pair p stored once under config (PairDataset::common_prefix when packed with
// share_prompt, else 0).
int64_t shared_prompt(const PairDataset& data, int64_t p, const BatchConfig& config);

// The tokens each pair takes in a micro-batch laid out by config: padded, two rows of its longer answer;
// packed, both answers (a shared prompt once). Token budgets, length bucketing and the filler choice
// (data/sampler.h) read these.
std::vector<int64_t> pair_tokens(const PairDataset& data, const BatchConfig& config);
int64_t pair_token_cost(const PairDataset& data, int64_t p, const BatchConfig& config);  // pair_tokens' entry p

// pair_mask may be empty (all real). Pair i of the result is pair_ids[order[i]] for some order.
PairBatch make_batch(const PairDataset& data, std::span<const int64_t> pair_ids, std::span<const uint8_t> pair_mask,
                     const BatchConfig& config);

}  // namespace zero::data
