// PairBatch -> the packed real-token plan, with validation against the batch's grid.
#include "model/token_plan.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace zero::model {

TokenPlan make_token_plan(const data::PairBatch& b, int64_t vocab_size) {
  const int64_t S = b.num_seqs(), grid = b.rows * b.row_len;
  ZERO_REQUIRE(b.rows >= 0 && b.row_len >= 0, InputError, "batch: bad grid {}x{}", b.rows, b.row_len);
  ZERO_REQUIRE(int64_t(b.tokens.size()) == grid && int64_t(b.positions.size()) == grid, InputError,
               "batch: tokens ({}) and positions ({}) must hold rows*row_len = {} entries", b.tokens.size(),
               b.positions.size(), grid);
  ZERO_REQUIRE(S == 2 * int64_t(b.pair_mask.size()), InputError, "batch: {} sequences for {} pairs (pair_mask)", S,
               b.pair_mask.size());
  ZERO_REQUIRE(int64_t(b.seq_row.size()) == S && int64_t(b.seq_start.size()) == S &&
                   int64_t(b.last_index.size()) == S,
               InputError, "batch: seq_row/seq_start/seq_len/last_index sizes differ ({}, {}, {}, {})",
               b.seq_row.size(), b.seq_start.size(), S, b.last_index.size());
  ZERO_REQUIRE(int64_t(b.cu_seqlens.size()) == S + 1 && b.cu_seqlens[0] == 0, InputError,
               "batch: cu_seqlens must hold {} offsets starting at 0 (it has {})", S + 1, b.cu_seqlens.size());
  TokenPlan p;
  p.cu_seqlens = b.cu_seqlens;
  p.tokens.reserve(b.real_tokens());
  p.positions.reserve(b.real_tokens());
  for (int64_t s = 0; s < S; ++s) {
    const int64_t row = b.seq_row[s], start = b.seq_start[s], len = b.seq_len[s];
    ZERO_REQUIRE(row >= 0 && row < b.rows && start >= 0 && len >= 1 && start + len <= b.row_len, InputError,
                 "batch: sequence {} (row {}, start {}, len {}) does not fit a {}x{} grid", s, row, start, len, b.rows,
                 b.row_len);
    ZERO_REQUIRE(b.cu_seqlens[s + 1] - b.cu_seqlens[s] == len, InputError,
                 "batch: cu_seqlens[{}] - cu_seqlens[{}] = {}, but sequence {} has {} tokens", s + 1, s,
                 b.cu_seqlens[s + 1] - b.cu_seqlens[s], s, len);
    const int64_t first = row * b.row_len + start;
    ZERO_REQUIRE(b.last_index[s] >= first && b.last_index[s] < first + len, InputError,
                 "batch: last_index {} of sequence {} is outside its tokens [{}, {})", b.last_index[s], s, first,
                 first + len);
    for (int64_t j = 0; j < len; ++j) {
      const int32_t tok = b.tokens[first + j];
      ZERO_REQUIRE(tok >= 0 && tok < vocab_size, InputError, "batch: token id {} at sequence {} position {} is outside [0, {})",
                   tok, s, j, vocab_size);
      p.tokens.push_back(tok);
      p.positions.push_back(b.positions[first + j]);
    }
    p.pooled.push_back(int32_t(b.cu_seqlens[s] + (b.last_index[s] - first)));
    p.max_seqlen = std::max(p.max_seqlen, int32_t(len));
  }
  p.padded_tokens = (p.num_tokens() + kTokenRowMultiple - 1) / kTokenRowMultiple * kTokenRowMultiple;
  return p;
}

TokensById group_tokens_by_id(const std::vector<int32_t>& tokens) {
  TokensById g;
  g.by_id.resize(tokens.size());
  std::iota(g.by_id.begin(), g.by_id.end(), 0);
  std::stable_sort(g.by_id.begin(), g.by_id.end(), [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
  for (size_t j = 0; j < g.by_id.size(); ++j) {
    if (j == 0 || tokens[g.by_id[j]] != g.ids.back()) {
      g.ids.push_back(tokens[g.by_id[j]]);
      g.id_start.push_back(int32_t(j));
    }
  }
  g.id_start.push_back(int32_t(g.by_id.size()));
  return g;
}

}  // namespace zero::model
