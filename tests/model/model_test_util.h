// Helpers for the model tests: PairBatch builders (padded and packed) and the HF fixture's batch in pair order.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/splitmix.h"
#include "data/batch.h"
#include "data/pair_dataset.h"

namespace zero::model::testing {

inline std::string fixture_dir() { return ZERO_MODEL_FIXTURE_DIR; }
inline std::string fixture_file() { return fixture_dir() + "/qwen3_rm_tiny.safetensors"; }

// One sequence per row, right-padded to the longest (or row_len).
inline data::PairBatch padded_batch(const std::vector<std::vector<int32_t>>& seqs, int32_t pad_id,
                                    int64_t row_len = 0) {
  data::PairBatch b;
  b.layout = data::BatchLayout::Padded;
  b.pad_id = pad_id;
  b.rows = int64_t(seqs.size());
  for (const auto& s : seqs) row_len = std::max<int64_t>(row_len, int64_t(s.size()));
  b.row_len = row_len;
  b.tokens.assign(b.rows * b.row_len, pad_id);
  b.positions.assign(b.rows * b.row_len, 0);
  b.cu_seqlens.push_back(0);
  for (int64_t r = 0; r < b.rows; ++r) {
    const int64_t len = int64_t(seqs[r].size());
    for (int64_t j = 0; j < len; ++j) {
      b.tokens[r * b.row_len + j] = seqs[r][j];
      b.positions[r * b.row_len + j] = int32_t(j);
    }
    b.seq_row.push_back(r);
    b.seq_start.push_back(0);
    b.seq_len.push_back(len);
    b.last_index.push_back(r * b.row_len + len - 1);
    b.cu_seqlens.push_back(b.cu_seqlens.back() + int32_t(len));
  }
  for (int64_t i = 0; i < b.rows / 2; ++i) {
    b.pair_ids.push_back(i);
    b.pair_mask.push_back(1);
  }
  return b;
}

// Sequences placed first-fit into rows of row_len columns (several per row), in the given row order.
// `placement[s]` = row of sequence s; sequences of a row are laid out in the order given by `order`.
inline data::PairBatch packed_batch(const std::vector<std::vector<int32_t>>& seqs, int32_t pad_id, int64_t row_len,
                                    const std::vector<int64_t>& order) {
  data::PairBatch b;
  b.layout = data::BatchLayout::Packed;
  b.pad_id = pad_id;
  b.row_len = row_len;
  const size_t S = seqs.size();
  b.seq_row.assign(S, 0);
  b.seq_start.assign(S, 0);
  b.seq_len.assign(S, 0);
  b.last_index.assign(S, 0);
  std::vector<int64_t> used;  // columns used per row
  for (int64_t s : order) {
    const int64_t len = int64_t(seqs[s].size());
    size_t r = 0;
    while (r < used.size() && used[r] + len > row_len) ++r;
    if (r == used.size()) used.push_back(0);
    b.seq_row[s] = int64_t(r);
    b.seq_start[s] = used[r];
    b.seq_len[s] = len;
    used[r] += len;
  }
  b.rows = int64_t(used.size());
  b.tokens.assign(b.rows * row_len, pad_id);
  b.positions.assign(b.rows * row_len, 0);
  for (size_t s = 0; s < S; ++s) {
    const int64_t first = b.seq_row[s] * row_len + b.seq_start[s];
    for (int64_t j = 0; j < b.seq_len[s]; ++j) {
      b.tokens[first + j] = seqs[s][j];
      b.positions[first + j] = int32_t(j);
    }
    b.last_index[s] = first + b.seq_len[s] - 1;
  }
  b.cu_seqlens.assign(1, 0);  // the model packs sequences in sequence order
  for (size_t s = 0; s < S; ++s) b.cu_seqlens.push_back(b.cu_seqlens.back() + int32_t(b.seq_len[s]));
  for (size_t i = 0; i < S / 2; ++i) {
    b.pair_ids.push_back(int64_t(i));
    b.pair_mask.push_back(1);
  }
  return b;
}

// The fixture's 6 rows as sequences in pair order: sequence 2i = row i (chosen), 2i+1 = row i+3 (rejected).
struct FixtureBatch {
  std::vector<std::vector<int32_t>> seqs;  // pair order
  std::vector<int64_t> fixture_row;        // fixture row of each sequence
  int64_t row_len = 0;
};

inline FixtureBatch fixture_batch(const checkpoint::SafetensorsReader& r) {
  const auto ids = r.read_i64("input_ids");
  const auto mask = r.read_i64("attention_mask");
  const auto pool = r.read_i64("pool_index");
  const auto& shape = r.tensor("input_ids").shape;  // [6, 17]
  FixtureBatch f;
  f.row_len = shape[1];
  const int64_t pairs = shape[0] / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    for (int64_t row : {i, i + pairs}) {
      std::vector<int32_t> s;
      for (int64_t j = 0; j < f.row_len && mask[row * f.row_len + j]; ++j) s.push_back(int32_t(ids[row * f.row_len + j]));
      if (int64_t(s.size()) != pool[row] + 1) throw std::runtime_error("fixture: pool_index is not the last real token");
      f.seqs.push_back(std::move(s));
      f.fixture_row.push_back(row);
    }
  }
  return f;
}

// Error of `got` against `ref`: max |d|, max |d| / |ref| where |ref| > floor, and ||d|| / ||ref||.
struct Err {
  double max_abs = 0, max_rel = 0, norm_rel = 0;
  int64_t bad = 0;  // elements with |d| > atol + rtol |ref|
};
inline Err compare(std::span<const float> got, std::span<const float> ref, double atol, double rtol) {
  Err e;
  double dn = 0, rn = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::abs(double(got[i]) - double(ref[i]));
    e.max_abs = std::max(e.max_abs, d);
    if (std::abs(ref[i]) > 1e-6) e.max_rel = std::max(e.max_rel, d / std::abs(double(ref[i])));
    if (!(d <= atol + rtol * std::abs(double(ref[i])))) ++e.bad;
    dn += d * d;
    rn += double(ref[i]) * double(ref[i]);
  }
  e.norm_rel = rn > 0 ? std::sqrt(dn / rn) : std::sqrt(dn);
  return e;
}

// A batch's rewards (sequence 2i chosen, 2i + 1 rejected of batch pair i) in dataset order: pair p's at
// 2p and 2p + 1, so two layouts that order their pairs differently compare element by element.
inline std::vector<float> rewards_by_pair_id(const data::PairBatch& b, const std::vector<float>& rewards) {
  std::vector<float> out(rewards.size());
  for (int64_t i = 0; i < b.num_pairs(); ++i)
    for (int k = 0; k < 2; ++k) out.at(size_t(2 * b.pair_ids[i] + k)) = rewards.at(size_t(2 * i + k));
  return out;
}

// Pairs of random tokens whose answers share a prompt, as {prompt, chosen rest, rejected rest} lengths:
// prompts of 30, 0, 70 (across a 64-token tile), 1, 16 and 50 tokens, identical answers (pair 5), rests of
// one token; every answer ends on end_id 1. For the data.share_prompt tests.
inline data::PairDataset pairs_with_shared_prompts(int64_t vocab) {
  const int32_t end_id = 1;
  const std::vector<std::array<int64_t, 3>> shape = {
      {30, 12, 25}, {0, 9, 14}, {70, 20, 40}, {1, 3, 5}, {16, 1, 1}, {50, 0, 0}, {5, 80, 2}};
  uint64_t state = 0x5ba7;
  auto token = [&] { return int32_t(2 + splitmix64(state) % uint64_t(vocab - 2)); };
  data::PairDataset ds;
  ds.end_id = end_id;
  ds.pad_id = 0;
  ds.offsets = {0};
  for (const auto& [prompt, c_rest, r_rest] : shape) {
    std::vector<int32_t> c, r;
    for (int64_t i = 0; i < prompt; ++i) c.push_back(token());
    r = c;
    for (int64_t i = 0; i < c_rest; ++i) c.push_back(token());
    for (int64_t i = 0; i < r_rest; ++i) r.push_back(token());
    for (auto* s : {&c, &r}) {
      s->push_back(end_id);
      ds.tokens.insert(ds.tokens.end(), s->begin(), s->end());
      ds.offsets.push_back(int64_t(ds.tokens.size()));
    }
  }
  return ds;
}

}  // namespace zero::model::testing
