// Where a PairBatch's real tokens go: gathers them (pads dropped, either layout) into one column buffer,
// sequence after sequence, with positions and each sequence's pooled column. Validates the batch.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.h"

namespace zero::model {

struct SeqSpan {
  int64_t offset = 0;  // first token row in the buffer
  int64_t len = 0;
};

struct TokenPlan {
  std::vector<int32_t> tokens;     // [N] real tokens, sequence 0 first
  std::vector<int32_t> positions;  // [N] from batch.positions
  std::vector<SeqSpan> seqs;       // [S] each sequence's columns
  std::vector<int64_t> pooled;     // [S] column of the pooled token (batch.last_index mapped)
  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(seqs.size()); }
};

// Throws InputError when the batch is inconsistent (sizes, a sequence outside its row, last_index outside
// its sequence, a token id outside [0, vocab_size)).
TokenPlan make_token_plan(const data::PairBatch& batch, int64_t vocab_size);

}  // namespace zero::model
