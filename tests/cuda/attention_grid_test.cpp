// The host half of the CUDA attention kernels, without a GPU: the grid -> (sequence, head, block)
// mapping and the loop bounds the kernels take from model/cuda/attention_grid.h, walked here on the host
// exactly as each kernel walks them and checked against the causal attention pattern from its
// definition (query i of a sequence sees keys 0..i of the same sequence, each (query, key, head) pair
// once); the shared-memory layouts; the workspace size; the argument and path checks (zero::ConfigError
// before anything touches a device); and the tensor-core register layout of model/cuda/mma_fragments.h
// against the PTX ISA's statement of it (literal lanes and elements copied from its fragment figures for
// mma.m16n8k16: the external reference), with the two facts the kernels build on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "core/math/attention_mask.h"
#include "model/cuda/attention_grid.h"
#include "model/cuda/attention_kernels.h"
#include "model/cuda/mma_fragments.h"

namespace zero::model::cuda_attention {
namespace {

// The causal mask alone: the loop bounds below are written for it (a hidden span only masks more).
bool causal_masked(int64_t query, int64_t key) { return math::attention_masked(query, key, 0, 0); }

// Ragged lengths with every tile edge, an empty sequence and one longer than 2048 / 64 blocks.
const std::vector<int64_t> kLengths = {1, 63, 64, 65, 0, 127, 128, 129, 2, 300};

TEST(AttentionGrid, RowGridVisitsEveryQueryBlockOnceHeaviestFirst) {
  const int64_t seqs = 5, heads = 3, max_len = 130;  // 3 query blocks
  ASSERT_EQ(row_grid_size(seqs, heads, max_len), 5 * 3 * 3);
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  int64_t previous_block = 3;
  for (int64_t i = 0; i < row_grid_size(seqs, heads, max_len); ++i) {
    const BlockCoord c = row_block(i, seqs, heads, max_len);
    ASSERT_TRUE(c.seq >= 0 && c.seq < seqs && c.head >= 0 && c.head < heads && c.block >= 0 && c.block < 3) << i;
    EXPECT_TRUE(seen.emplace(c.seq, c.head, c.block).second) << "block " << i << " visited twice";
    EXPECT_LE(c.block, previous_block) << "query blocks must come last block first (the heaviest)";
    previous_block = c.block;
  }
  EXPECT_EQ(seen.size(), size_t(5 * 3 * 3));
  EXPECT_EQ(row_block(0, seqs, heads, max_len).block, 2);  // the last query block first
}

// The wide forward's grid: 128-row blocks (literal: 4 warps x 32 rows), 2 for 130 rows, every row of every
// (sequence, head) in exactly one block, the last block first.
TEST(AttentionGrid, WideRowGridCoversEveryQueryRowOnce) {
  EXPECT_EQ(kWideBlockQ, 128);
  const int64_t seqs = 3, heads = 2, max_len = 130;
  ASSERT_EQ(row_grid_size(seqs, heads, max_len, kWideBlockQ), 3 * 2 * 2);
  std::map<std::tuple<int64_t, int64_t>, std::vector<int>> rows;  // (seq, head) -> times each row is covered
  for (int64_t i = 0; i < row_grid_size(seqs, heads, max_len, kWideBlockQ); ++i) {
    const BlockCoord c = row_block(i, seqs, heads, max_len, kWideBlockQ);
    if (i < seqs * heads) {
      EXPECT_EQ(c.block, 1) << "the last query block first";
    }
    const TileRows r = tile_rows(c.block, kWideBlockQ, max_len);
    auto& seen = rows[{c.seq, c.head}];
    seen.resize(max_len);
    for (int64_t q = r.first; q < r.first + r.count; ++q) ++seen[q];
  }
  ASSERT_EQ(rows.size(), size_t(seqs * heads));
  for (const auto& [key, seen] : rows)
    for (int64_t q = 0; q < max_len; ++q) EXPECT_EQ(seen[q], 1) << "row " << q;
}

// The wide dK/dV's grid: 128-key blocks (literal), 3 for 257 keys, every (sequence, kv head, block) once.
TEST(AttentionGrid, WideColumnGridVisitsEveryKeyBlockOnce) {
  EXPECT_EQ(kWideBlockK, 128);
  const int64_t seqs = 2, kv_heads = 3, max_len = 257;
  ASSERT_EQ(column_grid_size(seqs, kv_heads, max_len, kWideBlockK), 2 * 3 * 3);
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  for (int64_t i = 0; i < column_grid_size(seqs, kv_heads, max_len, kWideBlockK); ++i) {
    const BlockCoord c = column_block(i, seqs, kv_heads);
    ASSERT_TRUE(c.block >= 0 && c.block < 3) << i;
    EXPECT_TRUE(seen.emplace(c.seq, c.head, c.block).second) << i;
  }
  EXPECT_EQ(seen.size(), size_t(2 * 3 * 3));
}

TEST(AttentionGrid, ColumnGridVisitsEveryKeyBlockOnceInIncreasingOrder) {
  const int64_t seqs = 4, kv_heads = 2, max_len = 64 * 3 + 1;  // 4 key blocks
  ASSERT_EQ(column_grid_size(seqs, kv_heads, max_len), 4 * 2 * 4);
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  int64_t previous_block = 0;
  for (int64_t i = 0; i < column_grid_size(seqs, kv_heads, max_len); ++i) {
    const BlockCoord c = column_block(i, seqs, kv_heads);
    ASSERT_TRUE(c.seq >= 0 && c.seq < seqs && c.head >= 0 && c.head < kv_heads && c.block >= 0 && c.block < 4) << i;
    EXPECT_TRUE(seen.emplace(c.seq, c.head, c.block).second) << "block " << i << " visited twice";
    EXPECT_GE(c.block, previous_block);
    previous_block = c.block;
  }
  EXPECT_EQ(seen.size(), size_t(4 * 2 * 4));
}

TEST(AttentionGrid, TileRowsAtTheEdges) {
  EXPECT_EQ(tile_rows(0, 64, 1).count, 1);
  EXPECT_EQ(tile_rows(0, 64, 64).count, 64);
  EXPECT_EQ(tile_rows(1, 64, 64).count, 0);
  EXPECT_EQ(tile_rows(1, 64, 65).first, 64);
  EXPECT_EQ(tile_rows(1, 64, 65).count, 1);
  EXPECT_EQ(tile_rows(2, 64, 129).count, 1);
  EXPECT_LE(tile_rows(3, 64, 129).count, 0);
  EXPECT_EQ(blocks_of(129, 64), 3);
  EXPECT_EQ(blocks_of(0, 64), 0);
}

struct Batch {
  std::vector<int64_t> start;
  std::vector<int64_t> len;
  int64_t max_len = 0;
};
Batch batch_of(const std::vector<int64_t>& lengths, int64_t extra_max = 0) {
  Batch b;
  int64_t at = 0;
  for (int64_t l : lengths) {
    b.start.push_back(at);
    b.len.push_back(l);
    at += l;
    b.max_len = std::max(b.max_len, l);
  }
  b.max_len += extra_max;  // max_seqlen may exceed every length: the extra blocks must exit
  return b;
}

// (sequence, head, query position, key position) -> times the pair's score was used.
using PairCount = std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, int>;

// The causal pattern from its definition.
PairCount causal_pairs(const Batch& b, int64_t heads) {
  PairCount want;
  for (size_t s = 0; s < b.len.size(); ++s)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < b.len[s]; ++i)
        for (int64_t j = 0; j <= i; ++j) want[{int64_t(s), h, i, j}] = 1;
  return want;
}

// The forward and dQ kernels' loops (attention_fma_kernels.cuh), element by element: every unmasked score
// inside the sequence. Also checks each query row is written by exactly one block and key blocks come
// in increasing order (the order dQ's sum and the online softmax are specified in).
PairCount walk_row_kernel(const Batch& b, int64_t heads, std::map<std::tuple<int64_t, int64_t, int64_t>, int>& rows) {
  PairCount got;
  const int64_t seqs = int64_t(b.len.size());
  for (int64_t linear = 0; linear < row_grid_size(seqs, heads, b.max_len); ++linear) {
    const BlockCoord c = row_block(linear, seqs, heads, b.max_len);
    const int64_t len = b.len[c.seq];
    const TileRows qr = tile_rows(c.block, kBlockQ, len);
    if (qr.count <= 0) continue;
    EXPECT_LE(qr.count, kBlockQ);
    for (int64_t i = 0; i < qr.count; ++i) ++rows[{c.seq, c.head, qr.first + i}];
    int64_t last_k0 = -1;
    for (int64_t k0 = 0; k0 < key_end(qr); k0 += kBlockK) {
      EXPECT_GT(k0, last_k0);
      last_k0 = k0;
      for (int64_t i = 0; i < qr.count; ++i)
        for (int64_t j = 0; j < kBlockK; ++j)
          if (!causal_masked(qr.first + i, k0 + j)) {
            EXPECT_LT(k0 + j, len) << "an unmasked key past the sequence end";
            ++got[{c.seq, c.head, qr.first + i, k0 + j}];
          }
    }
  }
  return got;
}

TEST(AttentionGrid, RowKernelLoopsCoverTheCausalPatternOnce) {
  for (int64_t extra : {0, 100}) {
    const Batch b = batch_of(kLengths, extra);
    const int64_t heads = 3;
    std::map<std::tuple<int64_t, int64_t, int64_t>, int> rows;
    const PairCount got = walk_row_kernel(b, heads, rows);
    EXPECT_EQ(got, causal_pairs(b, heads)) << "max_seqlen + " << extra;
    int64_t want_rows = 0;
    for (int64_t l : kLengths) want_rows += l * heads;
    EXPECT_EQ(int64_t(rows.size()), want_rows);
    for (const auto& [row, n] : rows) EXPECT_EQ(n, 1);
  }
}

// The dK/dV kernel: for each key block, the query heads of its kv head ascending and then the query
// blocks ascending; each (query, key, query head) pair once, and each key row written by one block.
TEST(AttentionGrid, ColumnKernelLoopsCoverTheCausalPatternOnce) {
  const Batch b = batch_of(kLengths, 7);
  const int64_t heads = 8, kv_heads = 2, r = heads / kv_heads, seqs = int64_t(b.len.size());
  PairCount got;
  std::map<std::tuple<int64_t, int64_t, int64_t>, int> key_rows;
  for (int64_t linear = 0; linear < column_grid_size(seqs, kv_heads, b.max_len); ++linear) {
    const BlockCoord c = column_block(linear, seqs, kv_heads);
    const int64_t len = b.len[c.seq];
    const TileRows kr = tile_rows(c.block, kBlockK, len);
    if (kr.count <= 0) continue;
    for (int64_t j = 0; j < kr.count; ++j) ++key_rows[{c.seq, c.head, kr.first + j}];
    for (int64_t h = c.head * r; h < (c.head + 1) * r; ++h) {
      for (int64_t q0 = first_query_start(kr.first); q0 < len; q0 += kBlockQ) {
        const TileRows qr = tile_rows(q0 / kBlockQ, kBlockQ, len);
        ASSERT_GT(qr.count, 0);
        for (int64_t i = 0; i < qr.count; ++i)
          for (int64_t j = 0; j < kBlockK; ++j)
            if (!causal_masked(q0 + i, kr.first + j)) {
              EXPECT_LT(kr.first + j, len);
              ++got[{c.seq, h, q0 + i, kr.first + j}];
            }
      }
    }
  }
  EXPECT_EQ(got, causal_pairs(b, heads));
  int64_t want_keys = 0;
  for (int64_t l : kLengths) want_keys += l * kv_heads;
  EXPECT_EQ(int64_t(key_rows.size()), want_keys);
  for (const auto& [row, n] : key_rows) EXPECT_EQ(n, 1);
  // The first query block a key block needs: the one holding its first key (square tiles).
  EXPECT_EQ(first_query_start(0), 0);
  EXPECT_EQ(first_query_start(128), 128);
}

TEST(AttentionGrid, MaskIsCausalMinusTheHiddenSpan) {
  EXPECT_FALSE(causal_masked(5, 5));
  EXPECT_FALSE(causal_masked(5, 0));
  EXPECT_TRUE(causal_masked(5, 6));
  // A shared-prompt pair [shared 0-2 | chosen rest 3-5 | rejected rest 6-8]: hidden span [3, 6).
  using math::attention_masked;
  EXPECT_FALSE(attention_masked(4, 3, 3, 6));  // the chosen rest sees itself
  EXPECT_FALSE(attention_masked(4, 2, 3, 6));  // and the shared tokens
  EXPECT_TRUE(attention_masked(6, 3, 3, 6));   // the rejected rest does not see the chosen rest
  EXPECT_TRUE(attention_masked(8, 5, 3, 6));
  EXPECT_FALSE(attention_masked(8, 2, 3, 6));  // but sees the shared tokens
  EXPECT_FALSE(attention_masked(8, 6, 3, 6));  // and itself
  EXPECT_TRUE(attention_masked(6, 7, 3, 6));   // causally
}

// The kernels skip the per-element mask for a box of queries x keys that attention_box_masked calls unmasked:
// it must say "masked" exactly when some element of the box is (never less: a wrong score; more would only
// cost time). Every box of a 12-token sequence, under no span and spans at its start, middle and end.
TEST(AttentionGrid, BoxMaskedExactlyWhenAnElementIs) {
  const int64_t n = 12;
  int64_t unmasked_boxes = 0;
  for (const auto& [hb, he] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 2}, {3, 6}, {5, 11}, {1, 12}})
    for (int64_t q0 = 0; q0 < n; ++q0)
      for (int64_t q1 = q0; q1 < n; ++q1)
        for (int64_t k0 = 0; k0 < n; ++k0)
          for (int64_t k1 = k0; k1 < n; ++k1) {
            bool any = false;
            for (int64_t q = q0; q <= q1; ++q)
              for (int64_t k = k0; k <= k1; ++k) any = any || math::attention_masked(q, k, hb, he);
            ASSERT_EQ(math::attention_box_masked(q0, q1, k0, k1, hb, he), any)
                << "queries [" << q0 << ", " << q1 << "] keys [" << k0 << ", " << k1 << "] span [" << hb << ", " << he << ")";
            unmasked_boxes += !any;
          }
  EXPECT_GT(unmasked_boxes, 1000);  // the skip is taken, not only allowed
}

TEST(AttentionGrid, SharedMemoryLayout) {
  // Literal sizes at head_dim 128: forward Q 64x128, K and V 64x129, S 64x64, three row vectors;
  // backward Q and dO 64x128, K and V 64x129, P and dS 64x64, two row vectors.
  EXPECT_EQ(forward_smem(128).bytes(), 4 * (8192 + 8256 + 8256 + 4096 + 3 * 64));
  EXPECT_EQ(backward_smem(128).bytes(), 4 * (2 * 8192 + 2 * 8256 + 2 * 4096 + 2 * 64));
  // Within what an H100 (227 KiB) and an A100 (163 KiB) give one block.
  EXPECT_LE(backward_smem(kMaxHeadDim).bytes(), 163 * 1024);
  EXPECT_LE(forward_smem(kMaxHeadDim).bytes(), 163 * 1024);
  for (int d = 1; d <= kMaxHeadDim; ++d) {
    for (const SmemLayout& L : {forward_smem(d), backward_smem(d)}) {
      // Regions in order, 16-byte aligned, none overlapping the next.
      std::vector<std::pair<int, int>> regions = {{L.q, kBlockQ * d}, {L.k, kBlockK * kv_stride(d)},
                                                  {L.v, kBlockK * kv_stride(d)}, {L.s, kBlockQ * kBlockK}};
      if (L.d_o) regions.push_back({L.d_o, kBlockQ * d});
      if (L.ds) regions.push_back({L.ds, kBlockQ * kBlockK});
      std::sort(regions.begin(), regions.end());
      for (size_t i = 0; i < regions.size(); ++i) {
        EXPECT_EQ(regions[i].first % 4, 0) << "d " << d;
        const int end = regions[i].first + regions[i].second;
        EXPECT_LE(end, i + 1 < regions.size() ? regions[i + 1].first : L.row_a) << "d " << d;
      }
      EXPECT_LE(L.row_b + kBlockQ, L.floats);
    }
  }
  // The accumulator slots cover a [64, 128] tile over 256 threads.
  EXPECT_EQ(kAccSlots * kThreads, kBlockQ * kMaxHeadDim);
}

TEST(AttentionKernelsHost, WorkspaceBytes) {
  const AttentionShape s{32, 8, 128};
  EXPECT_EQ(backward_workspace_bytes(s, {nullptr, 0, 0, 0}), 0u);
  int32_t fake = 0;  // never read: sizes need no device
  EXPECT_EQ(backward_workspace_bytes(s, {&fake, 2, 600, 1000}), 1000u * 32 * 4);  // 128000 = 500 * 256
  EXPECT_EQ(backward_workspace_bytes({2, 1, 8}, {&fake, 1, 3, 3}), 256u);            // 24 bytes, rounded up
  EXPECT_EQ(backward_workspace_bytes({2, 1, 8}, {&fake, 1, 65, 65}), 768u);          // 520 -> 768
}

// Runs f and expects a zero::ConfigError whose message contains `needle`.
template <class F>
void expect_config_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AttentionKernelsHost, BadArgumentsFailBeforeAnyLaunch) {
  int32_t fake_cu = 0;
  float fake[4] = {};  // never dereferenced: every call below fails its checks first
  const VarlenBatch b{&fake_cu, 1, 10, 10};
  auto fwd = [&](AttentionShape s, VarlenBatch batch = {}) {
    if (batch.num_seqs == 0) batch = b;
    return [=, &fake] { forward(fake, fake, fake, Elem::F32, s, batch, fake, fake, nullptr); };
  };
  expect_config_error(fwd({6, 4, 64}), "not a multiple of kv_heads");
  expect_config_error(fwd({4, 0, 64}), "must be positive");
  expect_config_error(fwd({4, 2, 129}), "head_dim 129 unsupported");
  expect_config_error(fwd({4, 2, 136}), "head_dim 136 unsupported");
  expect_config_error(fwd({4, 2, 0}), "head_dim 0 unsupported");
  expect_config_error(fwd({4, 2, 64}, {nullptr, 2, 10, 10}), "cu_seqlens is null");
  expect_config_error(fwd({4, 2, 64}, {&fake_cu, 1, 11, 10}), "max_seqlen 11 exceeds num_tokens 10");
  expect_config_error(fwd({4, 2, 64}, {&fake_cu, -1, 10, 10}), "must not be negative");
  expect_config_error([&] { forward(fake, nullptr, fake, Elem::F32, {4, 2, 64}, b, fake, fake, nullptr); },
                      "null tensor");
  expect_config_error([&] { forward(fake, fake, fake, Elem(7), {4, 2, 64}, b, fake, fake, nullptr); },
                      "unknown element type 7");
  expect_config_error([&] { backward_workspace_bytes({3, 2, 64}, b); }, "not a multiple of kv_heads");

  const AttentionShape s{4, 2, 64};
  const size_t need = backward_workspace_bytes(s, b);
  alignas(256) static char workspace[512];
  auto bwd = [&](void* ws, size_t bytes) {
    return [=, &fake] {
      backward(fake, fake, fake, fake, fake, fake, Elem::BF16, s, b, fake, fake, fake, ws, bytes, nullptr);
    };
  };
  expect_config_error(bwd(workspace, need - 1), "workspace of 255 bytes given");
  expect_config_error(bwd(nullptr, need), "workspace of 256 bytes given");
  expect_config_error(bwd(workspace + 4, need), "not 256-byte aligned");
  expect_config_error([&] {
    backward(fake, fake, fake, fake, fake, fake, Elem::F32, {4, 2, 200}, b, fake, fake, fake, workspace, need, nullptr);
  }, "head_dim 200 unsupported");
}

// Every head_dim Qwen3 configs in this project use passes the shape checks: 128 (Qwen3-4B), 16 (the tiny
// preset) and 12 (the HF fixture tests/fixtures/qwen3_rm_tiny, which cuda_reward_model_test runs).
TEST(AttentionKernelsHost, ProjectHeadDimsAreSupported) {
  int32_t fake_cu = 0;
  for (int64_t d : {128, 16, 12, 1})
    EXPECT_NO_THROW(backward_workspace_bytes({6, 3, d}, {&fake_cu, 1, 10, 10})) << "head_dim " << d;
}

TEST(AttentionKernelsHost, EmptyBatchLaunchesNothing) {
  // No sequence (or only empty ones): nothing to compute, so no device is needed and no pointer is read.
  forward(nullptr, nullptr, nullptr, Elem::F32, {4, 2, 64}, {}, nullptr, nullptr, nullptr);
  int32_t fake_cu = 0;
  forward(nullptr, nullptr, nullptr, Elem::BF16, {4, 2, 64}, {&fake_cu, 3, 0, 0}, nullptr, nullptr, nullptr);
  backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, Elem::F32, {4, 2, 64}, {}, nullptr, nullptr, nullptr,
           nullptr, 0, nullptr);
}

// ---------------------------------------------------------------------------------------------------
// The tensor-core path.

// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" (figures for A, B, C): element
// positions of a few lanes, read off the figures (row, column).
TEST(MmaFragments, MatchThePtxFigures) {
  using mma::a_index;
  using mma::b_index;
  using mma::c_index;
  auto eq = [](mma::FragIndex got, int row, int col) { return got.row == row && got.col == col; };
  // A: lane 0 holds a0,a1 = (0,0),(0,1); a2,a3 = (8,0),(8,1); a4,a5 = (0,8),(0,9); a6,a7 = (8,8),(8,9).
  EXPECT_TRUE(eq(a_index(0, 0), 0, 0) && eq(a_index(0, 1), 0, 1) && eq(a_index(0, 2), 8, 0) && eq(a_index(0, 3), 8, 1));
  EXPECT_TRUE(eq(a_index(0, 4), 0, 8) && eq(a_index(0, 5), 0, 9) && eq(a_index(0, 6), 8, 8) && eq(a_index(0, 7), 8, 9));
  // Lane 5 (group 1, quad 1): a0 = (1,2), a3 = (9,3), a4 = (1,10), a7 = (9,11); lane 31: a7 = (15,15).
  EXPECT_TRUE(eq(a_index(5, 0), 1, 2) && eq(a_index(5, 3), 9, 3));
  EXPECT_TRUE(eq(a_index(5, 4), 1, 10) && eq(a_index(5, 7), 9, 11));
  EXPECT_TRUE(eq(a_index(31, 7), 15, 15) && eq(a_index(31, 0), 7, 6));
  // B (16 x 8, k x n): lane 0: b0,b1 = (0,0),(1,0), b2,b3 = (8,0),(9,0); lane 6 (group 1, quad 2): b0 =
  // (4,1), b3 = (13,1); lane 31: b3 = (15,7).
  EXPECT_TRUE(eq(b_index(0, 0), 0, 0) && eq(b_index(0, 1), 1, 0) && eq(b_index(0, 2), 8, 0) && eq(b_index(0, 3), 9, 0));
  EXPECT_TRUE(eq(b_index(6, 0), 4, 1) && eq(b_index(6, 3), 13, 1) && eq(b_index(31, 3), 15, 7));
  // C (16 x 8): lane 0: c0,c1 = (0,0),(0,1), c2,c3 = (8,0),(8,1); lane 6: c0 = (1,4), c3 = (9,5); lane 31:
  // c3 = (15,7).
  EXPECT_TRUE(eq(c_index(0, 0), 0, 0) && eq(c_index(0, 1), 0, 1) && eq(c_index(0, 2), 8, 0) && eq(c_index(0, 3), 8, 1));
  EXPECT_TRUE(eq(c_index(6, 0), 1, 4) && eq(c_index(6, 3), 9, 5) && eq(c_index(31, 3), 15, 7));
}

// Every element of each matrix is held by exactly one (lane, element), and each register's two elements
// are neighbours along k (one 32-bit load from a k-contiguous tile).
TEST(MmaFragments, EachElementOnceAndRegistersAreKAdjacent) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) EXPECT_TRUE(a.insert({mma::a_index(lane, i).row, mma::a_index(lane, i).col}).second);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(b.insert({mma::b_index(lane, i).row, mma::b_index(lane, i).col}).second);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(c.insert({mma::c_index(lane, i).row, mma::c_index(lane, i).col}).second);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(mma::a_index(lane, 2 * r + 1).row, mma::a_index(lane, 2 * r).row);
      EXPECT_EQ(mma::a_index(lane, 2 * r + 1).col, mma::a_index(lane, 2 * r).col + 1);
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(mma::b_index(lane, 2 * r + 1).col, mma::b_index(lane, 2 * r).col);
      EXPECT_EQ(mma::b_index(lane, 2 * r + 1).row, mma::b_index(lane, 2 * r).row + 1);
    }
  }
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_EQ(c.size(), 128u);
  for (const auto& [row, col] : a) EXPECT_TRUE(row < 16 && col < 16);
  for (const auto& [k, n] : b) EXPECT_TRUE(k < 16 && n < 8);
}

// FlashAttention-2's register reuse: the C fragments of n-tiles 0-7 and 8-15, element by element, are the
// A fragment of the 16 x 16 matrix they form (a_from_c_pair in attention_mma_kernels.cuh packs them so).
TEST(MmaFragments, TwoCTilesAreOneAFragment) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r) {
      for (int h = 0; h < 2; ++h) {
        const mma::FragIndex a = mma::a_index(lane, 2 * r + h);
        const int tile = r / 2, i = 2 * (r % 2) + h;  // register r of A = C tile r / 2, elements 2 (r % 2) + h
        const mma::FragIndex c = mma::c_index(lane, i);
        EXPECT_EQ(a.row, c.row) << "lane " << lane << " register " << r;
        EXPECT_EQ(a.col, 8 * tile + c.col) << "lane " << lane << " register " << r;
      }
    }
  }
}

// The kernels' fragment loads: a_offset / b_offset address the element the layout names, in tiles with
// the padded strides, and the 32 lanes of one load hit 32 different banks (4-byte words).
TEST(MmaFragments, LoadsAddressTheLayoutWithoutBankConflicts) {
  for (int row_elems : {64, 128}) {
    const int ld = mma::tile_stride(row_elems);
    EXPECT_EQ(ld * 2 % 16, 0) << "rows stay 16-byte aligned";
    for (int r = 0; r < 4; ++r) {
      std::set<int> banks;
      for (int lane = 0; lane < 32; ++lane) {
        const mma::FragIndex e = mma::a_index(lane, 2 * r);
        EXPECT_EQ(mma::a_offset(lane, r, ld, 16, 32), (16 + e.row) * ld + 32 + e.col);
        EXPECT_EQ(mma::a_offset(lane, r, ld, 0, 0) % 2, 0) << "a 32-bit aligned word";
        banks.insert(mma::bank_of_word(mma::a_offset(lane, r, ld, 16, 32) / 2));
      }
      EXPECT_EQ(banks.size(), 32u) << "A register " << r << " at row stride " << ld;
    }
    for (int r = 0; r < 2; ++r) {
      std::set<int> banks;
      for (int lane = 0; lane < 32; ++lane) {
        const mma::FragIndex e = mma::b_index(lane, 2 * r);
        EXPECT_EQ(mma::b_offset(lane, r, ld, 8, 48), (8 + e.col) * ld + 48 + e.row);
        banks.insert(mma::bank_of_word(mma::b_offset(lane, r, ld, 8, 48) / 2));
      }
      EXPECT_EQ(banks.size(), 32u) << "B register " << r << " at row stride " << ld;
    }
  }
}

TEST(AttentionGrid, TensorCoreSharedMemoryLayouts) {
  // Literal sizes at head_dim 128: a [64][136] bf16 tile is 17408 bytes.
  EXPECT_EQ(mma_smem(MmaKernel::Forward, 128).bytes, 4 * 17408);
  EXPECT_EQ(mma_smem(MmaKernel::Forward, 128).q, mma_smem(MmaKernel::Forward, 128).k_next);  // Q passes through
  EXPECT_EQ(mma_smem(MmaKernel::DkDv, 128).bytes, 6 * 17408 + 2 * 256);
  EXPECT_EQ(mma_smem(MmaKernel::Dq, 128).bytes, 6 * 17408 + 2 * 256);
  EXPECT_EQ(kMmaThreads, 128);
  // The wide forward: Q [128][136] (two 64-row tiles, one after the other: one tile of stride 136) and two
  // slots of K and V; two blocks fit an H100's 228 KiB.
  EXPECT_EQ(mma_smem(MmaKernel::ForwardWide, 128).bytes, 6 * 17408);
  EXPECT_EQ(rows_tile_bytes(128), kBlockQ * mma::tile_stride(128) * 2);
  EXPECT_EQ(rows_tile_bytes(64), kBlockQ * mma::tile_stride(64) * 2);
  EXPECT_LE(2 * mma_smem(MmaKernel::ForwardWide, 128).bytes, 228 * 1024);
  // The wide dK/dV: K and V [128][136], two slots of Q and dO, P^T and dS^T [128][72], lse and D: 172.5 KiB,
  // one block of an H100's 227.
  EXPECT_EQ(mma_smem(MmaKernel::DkDvWide, 128).bytes, 8 * 17408 + 2 * 128 * 72 * 2 + 2 * 256);
  EXPECT_LE(mma_smem(MmaKernel::DkDvWide, 128).bytes, 227 * 1024);
  EXPECT_EQ(kWideDkDvThreads, 256);
  for (int d : {64, 128}) {
    const MmaSmem W = mma_smem(MmaKernel::DkDvWide, d);
    const int rows = rows_tile_bytes(d);
    std::vector<std::pair<int, int>> regions = {{W.k, 2 * rows},   {W.v, 2 * rows},        {W.q, rows},
                                                {W.d_o, rows},     {W.q_next, rows},        {W.d_o_next, rows},
                                                {W.p_t, probs_tile_bytes()}, {W.ds_t, probs_tile_bytes()},
                                                {W.lse, kBlockQ * 4},        {W.row_dot, kBlockQ * 4}};
    std::sort(regions.begin(), regions.end());
    for (size_t i = 0; i < regions.size(); ++i) {
      EXPECT_GE(regions[i].first, 0);
      EXPECT_EQ(regions[i].first % 16, 0);
      EXPECT_LE(regions[i].first + regions[i].second, i + 1 < regions.size() ? regions[i + 1].first : W.bytes) << d;
    }
  }
  for (int d : {64, 128}) {
    const MmaSmem W = mma_smem(MmaKernel::ForwardWide, d);
    const int rows = rows_tile_bytes(d);
    EXPECT_EQ(W.q, 0);
    EXPECT_EQ(W.k, 2 * rows);  // past Q's two halves
    EXPECT_EQ(std::set<int>({W.k, W.v, W.k_next, W.v_next}), std::set<int>({2 * rows, 3 * rows, 4 * rows, 5 * rows}));
    EXPECT_EQ(W.bytes, 6 * rows);
  }
  for (int d : {64, 128}) {
    for (MmaKernel kind : {MmaKernel::Forward, MmaKernel::DkDv, MmaKernel::Dq}) {
      const MmaSmem L = mma_smem(kind, d);
      EXPECT_LE(L.bytes, 163 * 1024) << "fits an A100's block (and an H100's 227 KiB)";
      const int rows = rows_tile_bytes(d);
      std::vector<std::pair<int, int>> regions;
      for (int at : {kind == MmaKernel::Forward ? -1 : L.q, L.d_o, L.k, L.v, L.q_next, L.d_o_next, L.k_next, L.v_next})
        if (at >= 0) regions.push_back({at, rows});
      for (int at : {L.lse, L.row_dot})
        if (at >= 0) regions.push_back({at, kBlockQ * 4});
      std::sort(regions.begin(), regions.end());
      for (size_t i = 0; i < regions.size(); ++i) {
        EXPECT_EQ(regions[i].first % 16, 0);
        EXPECT_LE(regions[i].first + regions[i].second, i + 1 < regions.size() ? regions[i + 1].first : L.bytes);
      }
      // What each kernel reads: forward two slots of K and V (Q in the second); dK/dV K, V, two slots of Q
      // and dO and the row stats; dQ Q, dO, two slots of K and V and the row stats.
      const size_t want = kind == MmaKernel::Forward ? 4 : 8;
      EXPECT_EQ(regions.size(), want);
    }
  }
}

TEST(AttentionKernelsHost, TensorCorePathTakesBf16AtHeadDim64And128Only) {
  EXPECT_TRUE(mma_supported(Elem::BF16, {32, 8, 128}));
  EXPECT_TRUE(mma_supported(Elem::BF16, {8, 2, 64}));
  EXPECT_FALSE(mma_supported(Elem::F32, {32, 8, 128}));
  for (int64_t d : {12, 16, 40, 96, 120}) EXPECT_FALSE(mma_supported(Elem::BF16, {4, 2, d})) << d;

  int32_t fake_cu = 0;
  alignas(16) static float fake[8] = {};
  const VarlenBatch b{&fake_cu, 1, 10, 10};
  auto fwd = [&](Elem t, AttentionShape s, void* q) {
    return [=] { forward(q, fake, fake, t, s, b, fake, fake, nullptr, Path::Mma); };
  };
  expect_config_error(fwd(Elem::F32, {4, 2, 128}, fake), "got fp32, head_dim 128");
  expect_config_error(fwd(Elem::BF16, {4, 2, 12}, fake), "got bf16, head_dim 12");
  expect_config_error(fwd(Elem::BF16, {4, 2, 128}, reinterpret_cast<char*>(fake) + 2), "not 16-byte aligned");
  expect_config_error([&] { forward(fake, fake, fake, Elem::BF16, {4, 2, 128}, b, fake, fake, nullptr, Path(9)); },
                      "unknown path 9");
  alignas(256) static char workspace[256];
  expect_config_error([&] {
    backward(fake, fake, fake, fake, fake, fake, Elem::F32, {4, 2, 64}, b, fake, fake, fake, workspace, 256, nullptr,
             Path::Mma);
  }, "got fp32, head_dim 64");
}

}  // namespace
}  // namespace zero::model::cuda_attention
