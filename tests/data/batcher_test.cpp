// Batching on the bundled hh-rlhf test split: every sequence lands where the batch says (tokens,
// positions, last index, cu_seqlens), pairs stay whole, and bucketing/packing cut padding.
#include <numeric>
#include <set>

#include "data/batcher.h"
#include "data/sampler.h"
#include "data/token_cache.h"
#include "data/tokenizer.h"
#include "test_util.h"

namespace zero::data {
namespace {

const PairDataset& dataset() {
  static const PairDataset ds = [] {
    Tokenizer tok = Tokenizer::from_file(test::tokenizer_json());
    DataConfig cfg;
    cfg.files = {test::hh_test()};
    cfg.max_len = 512;
    return build_pair_dataset(cfg, tok);
  }();
  return ds;
}

// Checks the invariants both layouts share; returns the real tokens in memory order.
void check_batch(const PairDataset& ds, const PairBatch& b, const std::vector<int64_t>& want_pairs) {
  ASSERT_EQ(b.num_seqs(), 2 * b.num_pairs());
  ASSERT_EQ(int64_t(b.tokens.size()), b.rows * b.row_len);
  EXPECT_EQ(b.row_len % 8, 0);
  EXPECT_EQ(std::multiset<int64_t>(b.pair_ids.begin(), b.pair_ids.end()),
            std::multiset<int64_t>(want_pairs.begin(), want_pairs.end()));
  std::vector<uint8_t> used(b.tokens.size(), 0);
  ASSERT_EQ(int64_t(b.cu_seqlens.size()), b.num_seqs() + 1);
  EXPECT_EQ(b.cu_seqlens[0], 0);
  ASSERT_TRUE(b.shared.empty() || b.shared.size() == size_t(b.num_pairs()));
  for (int64_t s = 0; s < b.num_seqs(); ++s) {
    const auto src = ds.seq(2 * b.pair_ids[s / 2] + s % 2);  // 2i chosen, 2i+1 rejected
    // A rejected answer that shares its first tokens stores only its rest, at positions from `skip` on.
    const int64_t skip = s % 2 == 1 && !b.shared.empty() ? b.shared[s / 2] : 0;
    ASSERT_EQ(b.seq_len[s], int64_t(src.size()) - skip);
    const int64_t base = b.seq_row[s] * b.row_len + b.seq_start[s];
    ASSERT_LE(b.seq_start[s] + b.seq_len[s], b.row_len);
    for (int64_t k = 0; k < b.seq_len[s]; ++k) {
      ASSERT_EQ(b.tokens[base + k], src[skip + k]);
      ASSERT_EQ(b.positions[base + k], skip + k);
      ASSERT_EQ(used[base + k]++, 0) << "two sequences overlap";
    }
    if (skip > 0) {  // the shared tokens are the chosen answer's first ones, which sit right before
      const int64_t chosen = b.seq_row[s - 1] * b.row_len + b.seq_start[s - 1];
      ASSERT_EQ(base, chosen + b.seq_len[s - 1]);
      for (int64_t k = 0; k < skip; ++k) ASSERT_EQ(b.tokens[chosen + k], src[k]);
    }
    EXPECT_EQ(b.last_index[s], base + b.seq_len[s] - 1);
    EXPECT_EQ(b.tokens[b.last_index[s]], ds.end_id);
    EXPECT_EQ(b.cu_seqlens[s + 1] - b.cu_seqlens[s], b.seq_len[s]);
    if (s % 2 == 1 && b.layout == BatchLayout::Packed) {
      EXPECT_EQ(b.seq_row[s], b.seq_row[s - 1]);
    }
  }
  // Memory order equals sequence order: each row's real tokens form one run starting at column 0,
  // so dropping row tails gives the flattened layout cu_seqlens describes.
  std::vector<int32_t> flat, by_seq;
  for (int64_t r = 0; r < b.rows; ++r) {
    int64_t c = 0;
    while (c < b.row_len && used[r * b.row_len + c]) flat.push_back(b.tokens[r * b.row_len + c++]);
    for (; c < b.row_len; ++c) {
      EXPECT_EQ(used[r * b.row_len + c], 0) << "a gap inside row " << r;
      EXPECT_EQ(b.tokens[r * b.row_len + c], ds.pad_id);
      EXPECT_EQ(b.positions[r * b.row_len + c], 0);
    }
  }
  for (int64_t s = 0; s < b.num_seqs(); ++s) {
    const int64_t base = b.seq_row[s] * b.row_len + b.seq_start[s];
    by_seq.insert(by_seq.end(), b.tokens.begin() + base, b.tokens.begin() + base + b.seq_len[s]);
  }
  EXPECT_EQ(flat, by_seq);
  EXPECT_EQ(int64_t(flat.size()), b.real_tokens());
}

TEST(Batcher, PaddedAndPackedLayoutsHoldEverySequence) {
  const auto& ds = dataset();
  ASSERT_EQ(ds.num_pairs(), 221);
  EXPECT_EQ(ds.pad_id, 151643);
  for (const bool share : {false, true})
  for (const BatchLayout layout : {BatchLayout::Padded, BatchLayout::Packed}) {
    for (int64_t first = 0; first + 8 <= ds.num_pairs(); first += 37) {
      std::vector<int64_t> ids(8);
      std::iota(ids.begin(), ids.end(), first);
      std::vector<uint8_t> mask(8, 1);
      mask[7] = 0;
      BatchConfig cfg;
      cfg.layout = layout;
      cfg.pack_row_len = 1024;
      cfg.share_prompt = share;
      const PairBatch b = make_batch(ds, ids, mask, cfg);
      SCOPED_TRACE(layout == BatchLayout::Padded ? "padded" : share ? "packed, shared prompts" : "packed");
      EXPECT_EQ(b.shared.empty(), layout == BatchLayout::Padded || !share);
      for (size_t i = 0; i < b.shared.size(); ++i) EXPECT_EQ(b.shared[i], ds.common_prefix(b.pair_ids[i]));
      check_batch(ds, b, ids);
      EXPECT_EQ(b.real_pairs(), 7);
      if (layout == BatchLayout::Padded) {
        EXPECT_EQ(b.rows, 16);
        int64_t longest = 0;
        for (int64_t p : ids) longest = std::max({longest, ds.seq_len(2 * p), ds.seq_len(2 * p + 1)});
        EXPECT_GE(b.row_len, longest);
        EXPECT_LT(b.row_len, longest + 8);
      } else {
        EXPECT_LE(b.row_len, 1024);
        EXPECT_LT(b.rows, 16);
      }
    }
  }
}

TEST(Batcher, BucketingAndPackingCutPadding) {
  const auto& ds = dataset();
  double frac[3] = {0, 0, 0};  // no bucketing, bucketing, bucketing + packed
  for (int mode = 0; mode < 3; ++mode) {
    SamplerConfig sc;
    sc.seed = 1;
    sc.global_batch = 64;  // 8 micro-batches of 8 pairs, as FACTS.md's measurement
    sc.accum = 8;
    sc.bucket_by_length = mode > 0;
    BatchConfig bc;
    bc.layout = mode == 2 ? BatchLayout::Packed : BatchLayout::Padded;
    PairSampler sampler(sc, ds.num_pairs(), pair_tokens(ds, bc), 0, 1);
    int64_t real = 0, grid = 0;
    for (int64_t s = 0; s < sampler.steps_per_epoch(); ++s)
      for (const auto& m : sampler.next_step().micro) {
        const PairBatch b = make_batch(ds, m.pair_ids, m.pair_mask, bc);
        real += b.real_tokens();
        grid += b.rows * b.row_len;
      }
    frac[mode] = 1.0 - double(real) / double(grid);
  }
  std::printf("pad fraction: no bucketing %.3f, bucketed %.3f, packed %.3f\n", frac[0], frac[1], frac[2]);
  EXPECT_GT(frac[0], 0.3);  // hh-rlhf lengths vary a lot (FACTS: 0.60 padding to the longest)
  EXPECT_LT(frac[1], frac[0] / 2);
  EXPECT_LT(frac[2], frac[1]);
}

// The shared prompt of a pair: the answers' common first tokens, leaving each at least one token of its own.
// Worked by hand, then by definition over the bundled hh-rlhf pairs, whose answers share the conversation up
// to the last assistant turn (hence the saving printed and required).
TEST(Batcher, SharedPromptsAreTheAnswersCommonFirstTokens) {
  PairDataset hand;
  hand.tokens = {1, 2, 3, 9, 0, /**/ 1, 2, 3, 9, 0,  // identical answers: all but the last token shared
                 1, 2, 0, /**/ 1, 5, 0,              // one token shared
                 7, 0, /**/ 8, 0,                    // none
                 4, 0, /**/ 4, 6, 0};                // the chosen answer is the rejected one's start
  hand.offsets = {0, 5, 10, 13, 16, 18, 20, 22, 25};
  EXPECT_EQ(hand.common_prefix(0), 4);
  EXPECT_EQ(hand.common_prefix(1), 1);
  EXPECT_EQ(hand.common_prefix(2), 0);
  EXPECT_EQ(hand.common_prefix(3), 1);
  BatchConfig padded, packed, shared;
  padded.layout = BatchLayout::Padded;
  packed.layout = shared.layout = BatchLayout::Packed;
  packed.share_prompt = false;
  EXPECT_EQ(pair_tokens(hand, padded), (std::vector<int64_t>{10, 6, 4, 6}));
  EXPECT_EQ(pair_tokens(hand, packed), (std::vector<int64_t>{10, 6, 4, 5}));
  EXPECT_EQ(pair_tokens(hand, shared), (std::vector<int64_t>{6, 5, 4, 4}));

  const auto& ds = dataset();
  int64_t all = 0, saved = 0;
  for (int64_t p = 0; p < ds.num_pairs(); ++p) {
    const auto c = ds.seq(2 * p), r = ds.seq(2 * p + 1);
    const int64_t n = ds.common_prefix(p), most = int64_t(std::min(c.size(), r.size())) - 1;
    ASSERT_LE(n, most) << p;
    for (int64_t k = 0; k < n; ++k) ASSERT_EQ(c[k], r[k]) << p;
    if (n < most) {
      EXPECT_NE(c[n], r[n]) << p << ": a longer common prefix";
    }
    all += int64_t(c.size() + r.size());
    saved += n;
  }
  std::printf("shared prompts: %lld of %lld tokens (%.1f%%) stored once instead of twice\n", (long long)saved,
              (long long)all, 100.0 * double(saved) / double(all));
  EXPECT_GT(double(saved) / double(all), 0.2);
}

TEST(Batcher, EmptyAndSinglePair) {
  const auto& ds = dataset();
  const std::vector<int64_t> none;
  EXPECT_EQ(make_batch(ds, none, {}, {}).rows, 0);
  const std::vector<int64_t> one{5};
  BatchConfig packed;
  packed.layout = BatchLayout::Packed;
  const PairBatch b = make_batch(ds, one, {}, packed);
  check_batch(ds, b, one);
  EXPECT_EQ(b.rows, 1);
  EXPECT_EQ(b.pair_mask, std::vector<uint8_t>{1});
}

// Margins travel with their pairs: dataset (in line order), its cache, keep_first, drop_first, and every batch
// layout.
TEST(Batcher, MarginsFollowTheirPairs) {
  test::TempDir dir;
  std::string body;
  for (int i = 0; i < 6; ++i)
    body += nlohmann::json{{"chosen", std::string(size_t(1 + i * 7), 'x')}, {"rejected", "no"}, {"gap", 0.5 * i}}.dump() + "\n";
  test::write_text(dir.file("m.jsonl"), body);
  DataConfig cfg;
  cfg.files = {dir.file("m.jsonl")};
  cfg.reader.margin_field = "gap";
  Tokenizer tok = Tokenizer::from_file(test::tokenizer_json());
  CacheStatus st;
  const PairDataset built = load_or_build_dataset(cfg, tok, dir.file("c.bin"), &st);
  EXPECT_EQ(built.margins, (std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f}));
  const PairDataset cached = load_or_build_dataset(cfg, tok, dir.file("c.bin"), &st);
  EXPECT_EQ(st, CacheStatus::Hit);
  EXPECT_EQ(cached.margins, built.margins);
  for (const BatchLayout layout : {BatchLayout::Padded, BatchLayout::Packed}) {
    BatchConfig bc;
    bc.layout = layout;
    bc.pack_row_len = 64;  // several pairs a row, placed longest first: not the input order
    const std::vector<int64_t> ids = {1, 5, 2, 0};
    const PairBatch b = make_batch(cached, ids, {}, bc);
    ASSERT_EQ(b.pair_margin.size(), ids.size());
    for (int64_t i = 0; i < b.num_pairs(); ++i) EXPECT_EQ(b.pair_margin[i], 0.5f * float(b.pair_ids[i])) << i;
  }
  PairDataset first = cached;
  first.keep_first(2);
  EXPECT_EQ(first.margins, (std::vector<float>{0.0f, 0.5f}));
  // drop_first (pmtrain score's pairs leaving once scored): pair p + 4 becomes pair p, its tokens and margin
  // with it; dropping more than there are empties the dataset.
  PairDataset last = cached;
  last.drop_first(4);
  ASSERT_EQ(last.num_pairs(), 2);
  EXPECT_EQ(last.margins, (std::vector<float>{2.0f, 2.5f}));
  EXPECT_EQ(last.offsets.front(), 0);
  EXPECT_EQ(last.tokens.size(), size_t(last.offsets.back()));
  for (int64_t s = 0; s < 4; ++s) {
    const auto want = cached.seq(8 + s), got = last.seq(s);
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), std::vector<int32_t>(want.begin(), want.end())) << s;
  }
  last.drop_first(5);
  EXPECT_EQ(last.num_pairs(), 0);
  EXPECT_TRUE(last.tokens.empty() && last.margins.empty());
  // Data without a margin field: no margins in the dataset or its batches (the loss takes 0).
  cfg.reader.margin_field = "";
  const PairDataset plain = load_or_build_dataset(cfg, tok, dir.file("c.bin"), &st);
  EXPECT_EQ(st, CacheStatus::Stale);  // the margin field is part of the key
  EXPECT_TRUE(plain.margins.empty());
  EXPECT_TRUE(make_batch(plain, std::vector<int64_t>{0, 1}, {}, {}).pair_margin.empty());
}

}  // namespace
}  // namespace zero::data
