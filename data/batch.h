// The batch type the data pipeline hands to the model: a grid of token rows holding whole pairs.
// Two layouts behind one type:
//   Padded: one sequence per row, right-padded with pad_id (row_len a multiple of pad_to).
//   Packed: several sequences back to back in a row, no pad between them; the row tail may be padded.
// Every sequence knows its row, start column and length; positions restart at 0 per sequence;
// cu_seqlens lists sequence boundaries over the flattened grid as varlen attention kernels take them.
// Pairs stay whole: sequence 2*i is the chosen answer of pair i, sequence 2*i + 1 the rejected one.
// Shared prompts (packed only, data.share_prompt): when the two answers of pair i begin with the same
// shared[i] tokens, those are stored once, as the chosen sequence's first tokens, and the rejected sequence
// holds only its rest, placed right after the chosen one in the same row with positions from shared[i] on;
// its attention sees the shared tokens and not the chosen's rest (core/math/attention_mask.h).
#pragma once
#include <cstdint>
#include <vector>

namespace zero::data {

enum class BatchLayout : uint8_t { Padded, Packed };

struct PairBatch {
  BatchLayout layout = BatchLayout::Padded;
  int64_t rows = 0;
  int64_t row_len = 0;
  int32_t pad_id = 0;
  std::vector<int32_t> tokens;     // [rows * row_len]; pad_id where no sequence sits
  std::vector<int32_t> positions;  // [rows * row_len]; 0.. per sequence, 0 on padding

  // Per sequence (2 * num_pairs() entries).
  std::vector<int64_t> seq_row;
  std::vector<int64_t> seq_start;     // column of the first token in its row
  std::vector<int64_t> seq_len;       // tokens stored (the end token included; a rejected sequence that
                                      // shares its first tokens: only its rest)
  std::vector<int64_t> last_index;    // flat index row * row_len + start + len - 1: the pooled token
  std::vector<int32_t> cu_seqlens;    // [num_seqs + 1] offsets into the flattened real tokens when
                                      // each row's padding is dropped (varlen attention layout)

  std::vector<int64_t> pair_ids;      // dataset index of each pair (for coverage checks and logs)
  std::vector<uint8_t> pair_mask;     // 1 = real pair, 0 = a masked filler pair (remainder policy pad)
  std::vector<float> pair_margin;     // the pairs' margins (data with a margin field), else empty
  std::vector<int32_t> pair_group;    // each pair's group, 0 <= g < groups (pmtrain: its training set, for
  int32_t groups = 0;                 // per-set metrics; set by the caller), else empty and 0
  std::vector<int64_t> shared;        // per pair: leading tokens the rejected answer shares with the chosen
                                      // one, stored once (above); empty: none shared

  int64_t num_pairs() const { return static_cast<int64_t>(pair_ids.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(seq_len.size()); }
  int64_t real_pairs() const {
    int64_t n = 0;
    for (uint8_t m : pair_mask) n += m;
    return n;
  }
  // Tokens stored and computed (a shared prompt once).
  int64_t real_tokens() const {
    int64_t n = 0;
    for (int64_t l : seq_len) n += l;
    return n;
  }
  // Pair k's tokens stored and computed (its chosen sequence, then its rejected one), and its answers' whole.
  int64_t pair_real_tokens(int64_t k) const { return seq_len[2 * k] + seq_len[2 * k + 1]; }
  int64_t pair_answer_tokens(int64_t k) const { return pair_real_tokens(k) + (shared.empty() ? 0 : shared[k]); }
  // The tokens the answers hold whole (a shared prompt counted in both): what a layout without shared
  // prompts computes.
  int64_t answer_tokens() const {
    int64_t n = real_tokens();
    for (int64_t s : shared) n += s;
    return n;
  }
  double pad_fraction() const {
    const int64_t grid = rows * row_len;
    return grid ? 1.0 - double(real_tokens()) / double(grid) : 0.0;
  }
};

}  // namespace zero::data
