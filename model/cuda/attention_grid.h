// The index arithmetic of the CUDA attention kernels (attention_*_kernels.cuh), as ZERO_HD functions so the
// kernels and a host test (tests/cuda/attention_grid_test.cpp, runs without a GPU) share one definition:
// tile sizes, the grid -> (sequence, head, block) mapping, each block's rows and loop bounds, and the
// shared-memory layout. The loop bounds are the causal mask's (core/math/attention_mask.h, which also masks
// the zero-filled keys past the sequence end: they lie past every query); a hidden span only masks more
// elements of the tiles they visit. The loops themselves follow model/attention_tiled.h (the CPU
// emulation, which is the kernels' specification).
#pragma once
#include <cstdint>

#include "core/math/hd.h"
#include "model/cuda/mma_fragments.h"

namespace zero::model::cuda_attention {

// The emulation's default tiles (AttentionTiles): query rows per forward / dQ block and per dK/dV inner
// step, keys per forward / dQ inner step and per dK/dV block. Equal, so a key block's first query block
// starts at the same position (attention_tiled.h's loop bounds are written for the general case too).
constexpr int kBlockQ = 64;
constexpr int kBlockK = 64;
constexpr int kThreads = 256;  // per thread block, every kernel
// head_dim: any from 1 to 128 (Qwen3 uses 128; the tiny HF fixture tests/fixtures/qwen3_rm_tiny uses 12).
// The bound sizes the per-thread accumulators and the shared memory. The scalar FMA loops take any width;
// a later MMA / 16-byte-vector path would pad the tiles' rows to a multiple of 8 in shared memory rather
// than refuse other widths (a multiple-of-8 rule here once rejected the fixture's model outright).
constexpr int kMaxHeadDim = 128;
// Each thread owns up to this many elements of a [64, head_dim] accumulator tile (element e of the tile,
// row-major, belongs to thread e % kThreads, slot e / kThreads), so they stay in registers.
constexpr int kAccSlots = kBlockQ * kMaxHeadDim / kThreads;
static_assert(kBlockQ == kBlockK, "the accumulator slots and the dQ loop bound assume square tiles");
static_assert(kBlockQ * kMaxHeadDim % kThreads == 0, "accumulator tile must split evenly over the threads");

ZERO_HD int64_t blocks_of(int64_t len, int64_t block) { return (len + block - 1) / block; }

struct BlockCoord {
  int64_t seq = 0;
  int64_t head = 0;   // query head (forward, dQ) or kv head (dK/dV)
  int64_t block = 0;  // query block (forward, dQ) or key block (dK/dV)
};

// Forward and dQ: one thread block per (sequence, query head, query block) over the longest sequence's
// query blocks; blocks past a shorter sequence's end exit at once. Heaviest first: the last query
// blocks (which see the most keys) of every (sequence, head) get the lowest indices, so the long blocks
// start early and the short ones fill the tail.
// rows: query rows per block (kBlockQ; the wide tensor-core forward's kWideBlockQ).
ZERO_HD int64_t row_grid_size(int64_t num_seqs, int64_t heads, int64_t max_seqlen, int64_t rows = kBlockQ) {
  return num_seqs * heads * blocks_of(max_seqlen, rows);
}
ZERO_HD BlockCoord row_block(int64_t linear, int64_t num_seqs, int64_t heads, int64_t max_seqlen,
                             int64_t rows = kBlockQ) {
  const int64_t rest = linear / heads;
  return {rest % num_seqs, linear % heads, blocks_of(max_seqlen, rows) - 1 - rest / num_seqs};
}

// dK/dV: one thread block per (sequence, kv head, key block). Key block 0 sees every query block (the
// heaviest), so ascending key blocks is heaviest first. No block waits for another (dQ has its own
// kernel), so the order is only a load-balancing choice, never a progress condition.
// keys: keys per block (kBlockK; the wide tensor-core dK/dV's kWideBlockK).
ZERO_HD int64_t column_grid_size(int64_t num_seqs, int64_t kv_heads, int64_t max_seqlen, int64_t keys = kBlockK) {
  return num_seqs * kv_heads * blocks_of(max_seqlen, keys);
}
ZERO_HD BlockCoord column_block(int64_t linear, int64_t num_seqs, int64_t kv_heads) {
  const int64_t rest = linear / kv_heads;
  return {rest % num_seqs, linear % kv_heads, rest / num_seqs};
}

// Rows of block `block` (of `tile` rows) in a sequence of length len: positions [first, first + count);
// count <= 0: the block lies past the sequence end (the thread block exits).
struct TileRows {
  int64_t first = 0;
  int64_t count = 0;
};
ZERO_HD TileRows tile_rows(int64_t block, int64_t tile, int64_t len) {
  const int64_t first = block * tile, left = len - first;
  return {first, left < tile ? left : tile};
}

// Forward / dQ: key blocks k0 = 0, kBlockK, ... while k0 < key_end: up to the one holding the block's
// last query (every later key block is fully masked).
ZERO_HD int64_t key_end(const TileRows& queries) { return queries.first + queries.count; }
// dK/dV: the first query block that sees key k0 (earlier query blocks see none of the key block).
ZERO_HD int64_t first_query_start(int64_t k0) { return k0 / kBlockQ * kBlockQ; }

// K and V tiles are stored [rows, head_dim + 1]: in Q K^T and dO V^T the 32 lanes of a warp read 32
// consecutive keys at one column, and an odd row stride puts them in 32 different banks.
ZERO_HD int kv_stride(int head_dim) { return head_dim + 1; }

// Dynamic shared memory of one thread block, offsets in floats (all multiples of 4: 16-byte aligned).
struct SmemLayout {
  int q = 0, d_o = 0, k = 0, v = 0, s = 0, ds = 0, row_a = 0, row_b = 0, row_c = 0;
  int floats = 0;
  ZERO_HD int bytes() const { return floats * int(sizeof(float)); }
};
ZERO_HD int round4(int n) { return (n + 3) / 4 * 4; }

// Forward: Q [64, d], K and V [64, d + 1], S/P [64, 64], per row m, l and the rescale factor alpha.
ZERO_HD SmemLayout forward_smem(int head_dim) {
  SmemLayout L;
  int at = 0;
  L.q = at, at += round4(kBlockQ * head_dim);
  L.k = at, at += round4(kBlockK * kv_stride(head_dim));
  L.v = at, at += round4(kBlockK * kv_stride(head_dim));
  L.s = at, at += kBlockQ * kBlockK;
  L.row_a = at, at += kBlockQ;  // m
  L.row_b = at, at += kBlockQ;  // l
  L.row_c = at, at += kBlockQ;  // alpha
  L.floats = at;
  return L;
}

// Backward (dK/dV and dQ kernels alike): Q and dO [64, d], K and V [64, d + 1], P and dS [64, 64], per
// query row lse and D.
ZERO_HD SmemLayout backward_smem(int head_dim) {
  SmemLayout L;
  int at = 0;
  L.q = at, at += round4(kBlockQ * head_dim);
  L.d_o = at, at += round4(kBlockQ * head_dim);
  L.k = at, at += round4(kBlockK * kv_stride(head_dim));
  L.v = at, at += round4(kBlockK * kv_stride(head_dim));
  L.s = at, at += kBlockQ * kBlockK;
  L.ds = at, at += kBlockQ * kBlockK;
  L.row_a = at, at += kBlockQ;  // lse
  L.row_b = at, at += kBlockQ;  // D
  L.floats = at;
  return L;
}

// ---------------------------------------------------------------------------------------------------
// The bf16 tensor-core kernels (attention_mma_kernels.cuh): 4 warps per block, each warp owns 16 rows of the
// block's 64 (query rows in forward and dQ, key rows in dK/dV). head_dim 64 or 128 (a multiple of
// mma::kK that fits the registers; Qwen3 uses 128 throughout).
constexpr int kMmaWarps = kBlockQ / mma::kM;
constexpr int kMmaThreads = 32 * kMmaWarps;
// The wide forward (Path::MmaWide): the same 4 warps own 32 query rows each, a block 128 rows, so every K and V
// fragment loaded from shared memory feeds the products of two 16-row tiles (FlashAttention-2's forward
// shape). Key tiles stay kBlockK, so each row sees the same sums in the same order: the same bits as the
// 16-row forward.
constexpr int kWideRowTiles = 2;
constexpr int kWideWarpRows = kWideRowTiles * mma::kM;
constexpr int kWideBlockQ = kMmaWarps * kWideWarpRows;
static_assert(kWideBlockQ % kBlockK == 0, "a wide block's rows end where a key tile ends");
// The wide dK/dV (Path::MmaWide), FlashAttention-2's backward shape: 8 warps over 128 keys. S^T and dP^T of a
// (query head, 64-query tile) pair come from a 4 x 2 grid of warps, each 32 keys x 32 queries (every K, V, Q and
// dO fragment feeding two products where the 16-key warps fed one), P^T and dS^T go through shared memory (bf16,
// as the products take them), and each warp adds its 32 keys x half the head's columns of dV and dK.
constexpr int kWideBlockK = 128;
constexpr int kWideKeyRows = 32;  // keys a warp owns in both phases
constexpr int kWideDkDvWarps = (kWideBlockK / kWideKeyRows) * 2;
constexpr int kWideDkDvThreads = 32 * kWideDkDvWarps;
static_assert(kWideBlockK % kBlockQ == 0, "a wide key block starts where a query tile starts");
ZERO_HD bool mma_head_dim(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

// Their shared memory, offsets in bytes (0 or more; -1: the kernel has no such tile): row-major [64][d] bf16
// tiles (Q, dO, K, V as the rows come) with the padded strides of mma_fragments.h (ldmatrix transposes the
// B operands whose k runs over a tile's rows as it loads them), then per-row fp32 lse (times log2 e) and D.
// The tiles a kernel walks through come in two slots (the next one's copy runs while this one is used):
// K and V in forward (Q passing through the second slot) and dQ, Q and dO in dK/dV.
struct MmaSmem {
  int q = -1, d_o = -1, k = -1, v = -1, lse = -1, row_dot = -1;
  int q_next = -1, d_o_next = -1, k_next = -1, v_next = -1;  // the second slots
  int p_t = -1, ds_t = -1;  // the wide dK/dV's P^T and dS^T: [128 keys][64 queries] bf16, stride tile_stride(64)
  int bytes = 0;
};
ZERO_HD int round16(int n) { return (n + 15) / 16 * 16; }
ZERO_HD int rows_tile_bytes(int head_dim) { return round16(kBlockQ * mma::tile_stride(head_dim) * 2); }
ZERO_HD int probs_tile_bytes() { return round16(kWideBlockK * mma::tile_stride(kBlockQ) * 2); }
enum class MmaKernel : int { Forward = 0, DkDv = 1, Dq = 2, ForwardWide = 3, DkDvWide = 4 };
ZERO_HD MmaSmem mma_smem(MmaKernel kernel, int head_dim) {
  MmaSmem L;
  int at = 0;
  auto rows = [&](int& field) { field = at, at += rows_tile_bytes(head_dim); };
  if (kernel == MmaKernel::Forward) {
    rows(L.k), rows(L.v), rows(L.k_next), rows(L.v_next);
    L.q = L.k_next;
  } else if (kernel == MmaKernel::ForwardWide) {
    // Q [128][d] stays for the whole kernel (its fragments are loaded again for every key tile: 32 rows of
    // them do not fit the registers beside the accumulators), as two 64-row tiles one after the other.
    rows(L.q), at += rows_tile_bytes(head_dim);
    rows(L.k), rows(L.v), rows(L.k_next), rows(L.v_next);
  } else if (kernel == MmaKernel::DkDvWide) {
    // K and V [128][d] (two 64-row tiles each), two slots of Q and dO, P^T and dS^T, the row stats.
    rows(L.k), at += rows_tile_bytes(head_dim);
    rows(L.v), at += rows_tile_bytes(head_dim);
    rows(L.q), rows(L.d_o), rows(L.q_next), rows(L.d_o_next);
    L.p_t = at, at += probs_tile_bytes();
    L.ds_t = at, at += probs_tile_bytes();
    L.lse = at, at += kBlockQ * 4;
    L.row_dot = at, at += kBlockQ * 4;
  } else {
    rows(L.q), rows(L.d_o), rows(L.k), rows(L.v);
    if (kernel == MmaKernel::DkDv) rows(L.q_next), rows(L.d_o_next);
    else rows(L.k_next), rows(L.v_next);
    L.lse = at, at += kBlockQ * 4;
    L.row_dot = at, at += kBlockQ * 4;
  }
  L.bytes = at;
  return L;
}

}  // namespace zero::model::cuda_attention
