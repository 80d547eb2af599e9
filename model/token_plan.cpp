// PairBatch -> the packed real-token plan, with validation against the batch's grid.
#include "model/token_plan.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace zero::model {

double attention_scores(const TokenPlan& p) {
  double scores = 0;
  for (int64_t a = 0; a < p.num_attention_seqs(); ++a) {
    const double L = double(p.cu_seqlens[size_t(a) + 1] - p.cu_seqlens[size_t(a)]);
    scores += L * (L + 1) / 2;
    if (p.hidden.empty()) continue;
    const double begin = p.hidden[2 * size_t(a)], end = p.hidden[2 * size_t(a) + 1];
    scores -= (L - end) * (end - begin);  // queries end .. L-1 do not see keys begin .. end-1
  }
  return scores;
}

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
  ZERO_REQUIRE(b.shared.empty() || b.shared.size() == b.pair_mask.size(), InputError,
               "batch: shared has {} entries for {} pairs", b.shared.size(), b.pair_mask.size());
  TokenPlan p;
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
  }

  // Attention sequences: each answer on its own, or a pair that shares its first P tokens as one sequence
  // [shared | chosen's rest | rejected's rest] whose hidden span is the chosen's rest.
  const bool any_shared = std::any_of(b.shared.begin(), b.shared.end(), [](int64_t n) { return n > 0; });
  p.cu_seqlens.push_back(0);
  auto add_sequence = [&](int32_t end, int32_t hidden_begin, int32_t hidden_end) {
    p.max_seqlen = std::max(p.max_seqlen, end - p.cu_seqlens.back());
    p.cu_seqlens.push_back(end);
    if (any_shared) p.hidden.insert(p.hidden.end(), {hidden_begin, hidden_end});
  };
  for (int64_t i = 0; 2 * i < S; ++i) {
    const int64_t c = 2 * i, r = c + 1, shared = b.shared.empty() ? 0 : b.shared[i];
    if (shared == 0) {
      add_sequence(b.cu_seqlens[c + 1], 0, 0);
      add_sequence(b.cu_seqlens[r + 1], 0, 0);
      continue;
    }
    const int64_t chosen_first = b.seq_row[c] * b.row_len + b.seq_start[c];
    ZERO_REQUIRE(shared >= 1 && shared < b.seq_len[c], InputError,
                 "batch: pair {} shares {} tokens, but its chosen sequence stores {} (a shared prompt needs a "
                 "chosen rest of at least one token)",
                 i, shared, b.seq_len[c]);
    ZERO_REQUIRE(b.seq_row[r] == b.seq_row[c] && b.seq_start[r] == b.seq_start[c] + b.seq_len[c], InputError,
                 "batch: pair {} shares its prompt, but its rejected rest (row {}, start {}) does not follow the "
                 "chosen sequence (row {}, start {}, len {})",
                 i, b.seq_row[r], b.seq_start[r], b.seq_row[c], b.seq_start[c], b.seq_len[c]);
    ZERO_REQUIRE(b.positions[chosen_first + b.seq_len[c]] == shared, InputError,
                 "batch: pair {} shares {} tokens, but its rejected rest starts at position {}", i, shared,
                 b.positions[chosen_first + b.seq_len[c]]);
    add_sequence(b.cu_seqlens[r + 1], int32_t(shared), int32_t(b.seq_len[c]));
  }
  p.padded_tokens = padded_token_rows(p.num_tokens());
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
