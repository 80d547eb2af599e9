// The token plan of a micro-batch, made once and shared by every layer and both backends: the batch's real
// tokens packed sequence after sequence (pads dropped, either layout), their RoPE positions, the attention
// sequences as varlen attention kernels take them (each answer, or a shared-prompt pair as one sequence with a
// hidden span), and each answer's pooled token. Validates the batch.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.h"

namespace zero::model {

// Backends that tile their GEMMs over tokens (the GPU) round the token rows of every activation up to a
// multiple of this; the extra rows are never attended to nor pooled.
inline constexpr int64_t kTokenRowMultiple = 64;
// `tokens` rounded up to kTokenRowMultiple: such a backend's rows (TokenPlan::padded_tokens).
inline constexpr int64_t padded_token_rows(int64_t tokens) {
  return (tokens + kTokenRowMultiple - 1) / kTokenRowMultiple * kTokenRowMultiple;
}

struct TokenPlan {
  std::vector<int32_t> tokens;      // [N] real token ids, sequence 0 first
  std::vector<int32_t> positions;   // [N] RoPE positions (batch.positions at those tokens)
  // [A + 1] attention sequence a is tokens [cu_seqlens[a], cu_seqlens[a + 1]): an answer, or a pair whose
  // answers share their first tokens (batch.shared) as [shared | chosen's rest | rejected's rest].
  std::vector<int32_t> cu_seqlens;
  // [2 A] each attention sequence's hidden span (begin, end: core/math/attention_mask.h; a shared pair's
  // chosen rest, else 0, 0), or empty when no pair of the batch shares.
  std::vector<int32_t> hidden;
  std::vector<int32_t> pooled;      // [S] token index of each answer's pooled token (batch.last_index's)
  int32_t max_seqlen = 0;           // the longest attention sequence
  int64_t padded_tokens = 0;        // padded_token_rows(N)

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(pooled.size()); }  // answers: 2 per pair
  int64_t num_attention_seqs() const { return static_cast<int64_t>(cu_seqlens.size()) - 1; }
};

// The query-key pairs attention scores over the plan (those core/math/attention_mask.h leaves visible): each
// sequence's L (L + 1) / 2, less its hidden span's keys for every query after the span. What
// model::attention_flops counts (model/attention.h).
double attention_scores(const TokenPlan& p);

// The plan's tokens grouped by id, for the embedding's deterministic backward (both backends): each used
// row of the table is the sum of its tokens' gradients in token order, no atomics.
struct TokensById {
  std::vector<int32_t> by_id;     // token indices sorted by id, stable
  std::vector<int32_t> ids;       // the distinct ids, ascending
  std::vector<int32_t> id_start;  // [ids + 1]: id u's tokens are by_id[id_start[u] .. id_start[u + 1])
};
TokensById group_tokens_by_id(const std::vector<int32_t>& tokens);

// Throws InputError when the batch is inconsistent (sizes, a sequence outside its row, cu_seqlens that
// disagree with the sequence lengths, last_index outside its sequence, a token id outside [0, vocab_size), a
// shared prompt whose rejected rest does not follow its chosen sequence).
TokenPlan make_token_plan(const data::PairBatch& batch, int64_t vocab_size);

}  // namespace zero::model
