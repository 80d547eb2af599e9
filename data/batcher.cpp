// Padded and packed PairBatch construction.
#include "data/batcher.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace zero::data {

namespace {

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Writes sequence s of the dataset, less its first `skip` tokens (a shared prompt stored with the chosen
// answer), into row `row` at column `start` and records its metadata; positions go on from skip.
void place(const PairDataset& data, int64_t s, int64_t skip, int64_t row, int64_t start, PairBatch& b) {
  const auto toks = data.seq(s).subspan(size_t(skip));
  const int64_t len = int64_t(toks.size());
  const int64_t base = row * b.row_len + start;
  std::copy(toks.begin(), toks.end(), b.tokens.begin() + base);
  for (int64_t k = 0; k < len; ++k) b.positions[base + k] = int32_t(skip + k);
  b.seq_row.push_back(row);
  b.seq_start.push_back(start);
  b.seq_len.push_back(len);
  b.last_index.push_back(base + len - 1);
  b.cu_seqlens.push_back(b.cu_seqlens.back() + int32_t(len));
}

}  // namespace

int64_t shared_prompt(const PairDataset& data, int64_t p, const BatchConfig& config) {
  return config.layout == BatchLayout::Packed && config.share_prompt ? data.common_prefix(p) : 0;
}

int64_t pair_token_cost(const PairDataset& data, int64_t p, const BatchConfig& config) {
  const int64_t c = data.seq_len(2 * p), r = data.seq_len(2 * p + 1);
  return config.layout == BatchLayout::Padded ? 2 * std::max(c, r) : c + r - shared_prompt(data, p, config);
}

std::vector<int64_t> pair_tokens(const PairDataset& data, const BatchConfig& config) {
  std::vector<int64_t> t(size_t(data.num_pairs()));
  for (int64_t p = 0; p < data.num_pairs(); ++p) t[size_t(p)] = pair_token_cost(data, p, config);
  return t;
}

PairBatch make_batch(const PairDataset& data, std::span<const int64_t> pair_ids, std::span<const uint8_t> pair_mask,
                     const BatchConfig& config) {
  ZERO_REQUIRE(config.pad_to >= 1, ConfigError, "batch pad_to must be >= 1, got {}", config.pad_to);
  ZERO_REQUIRE(pair_mask.empty() || pair_mask.size() == pair_ids.size(), InternalError,
               "pair_mask has {} entries for {} pairs", pair_mask.size(), pair_ids.size());
  for (int64_t p : pair_ids)
    ZERO_REQUIRE(p >= 0 && p < data.num_pairs(), InternalError, "pair id {} outside 0..{}", p, data.num_pairs());
  const size_t n = pair_ids.size();
  // Pair i of the input joins the batch: its id, mask and margin (the sequences are placed by the caller).
  auto add_pair = [&](size_t i, PairBatch& b) {
    b.pair_ids.push_back(pair_ids[i]);
    b.pair_mask.push_back(pair_mask.empty() ? 1 : pair_mask[i]);
    if (!data.margins.empty()) b.pair_margin.push_back(data.margins[size_t(pair_ids[i])]);
  };

  PairBatch b;
  b.layout = config.layout;
  b.pad_id = data.pad_id;
  b.cu_seqlens.push_back(0);
  if (n == 0) return b;

  if (config.layout == BatchLayout::Padded) {
    int64_t longest = 1;
    for (int64_t p : pair_ids) longest = std::max({longest, data.seq_len(2 * p), data.seq_len(2 * p + 1)});
    b.rows = int64_t(2 * n);
    b.row_len = round_up(longest, config.pad_to);
    b.tokens.assign(b.rows * b.row_len, b.pad_id);
    b.positions.assign(b.rows * b.row_len, 0);
    for (size_t i = 0; i < n; ++i) {
      place(data, 2 * pair_ids[i], 0, int64_t(2 * i), 0, b);
      place(data, 2 * pair_ids[i] + 1, 0, int64_t(2 * i + 1), 0, b);
      add_pair(i, b);
    }
    return b;
  }

  // Packed: first-fit decreasing over pairs (longest first, ties by input order for determinism).
  std::vector<int64_t> plen(n), shared(n);
  int64_t longest_pair = 1;
  for (size_t i = 0; i < n; ++i) {
    shared[i] = shared_prompt(data, pair_ids[i], config);
    plen[i] = data.seq_len(2 * pair_ids[i]) + data.seq_len(2 * pair_ids[i] + 1) - shared[i];
    longest_pair = std::max(longest_pair, plen[i]);
  }
  const int64_t capacity = std::max(config.pack_row_len, longest_pair);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return plen[x] > plen[y]; });
  std::vector<int64_t> fill;                  // tokens used per row
  std::vector<std::vector<size_t>> members;   // pairs (input index) per row
  for (size_t i : order) {
    size_t r = 0;
    while (r < fill.size() && fill[r] + plen[i] > capacity) ++r;
    if (r == fill.size()) {
      fill.push_back(0);
      members.emplace_back();
    }
    fill[r] += plen[i];
    members[r].push_back(i);
  }
  b.rows = int64_t(fill.size());
  b.row_len = round_up(std::max<int64_t>(1, *std::max_element(fill.begin(), fill.end())), config.pad_to);
  b.tokens.assign(b.rows * b.row_len, b.pad_id);
  b.positions.assign(b.rows * b.row_len, 0);
  for (int64_t r = 0; r < b.rows; ++r) {
    int64_t col = 0;
    for (size_t i : members[r]) {
      const int64_t p = pair_ids[i];
      place(data, 2 * p, 0, r, col, b);
      col += data.seq_len(2 * p);
      place(data, 2 * p + 1, shared[i], r, col, b);
      col += data.seq_len(2 * p + 1) - shared[i];
      add_pair(i, b);
      if (config.share_prompt) b.shared.push_back(shared[i]);
    }
  }
  return b;
}

}  // namespace zero::data
