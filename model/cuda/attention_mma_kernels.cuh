// The tensor-core attention kernels (attention_kernels.h, Path::Mma): bf16 storage, head_dim 64 or 128.
// Kernels only (launched by attention_mma.cu); the file also compiles as host C++ under a SIMT emulator
// (ZERO_SIMT_EMULATION, tests/cuda/simt_emulator.h), so CI runs these very kernels without a GPU.
// The loop nest, tiles and grid are those of the fp32-FMA kernels (attention_fma_kernels.cuh) and of their
// specification, the CPU emulation model/attention_tiled.h; what changes is who does the tile products:
// mma.sync m16n8k16 (bf16 inputs, fp32 accumulation; register layout in mma_fragments.h), each of the 4
// warps of a block owning 16 of its 64 rows, FlashAttention-2 style:
//   - forward: a warp keeps its 16 query rows' Q fragments, the O accumulator and the softmax row state
//     (max and sum, in the exp2 domain: scores times scale * log2 e) in registers; per 64-key tile
//     S = Q K^T, the online softmax on S's fragments, then P (rounded to bf16) feeds P V straight from
//     registers (mma_fragments.h: C pairs are A fragments).
//   - backward, dK/dV: a warp owns 16 keys; per query tile and 16-query chunk it recomputes S^T = K Q^T
//     and dP^T = V dO^T, forms P^T and dS^T = scale * P^T (dP^T - D) (softmax_backward.h) and adds
//     P^T dO to dV and dS^T Q to dK, over the group's query heads and query tiles ascending.
//   - backward, dQ: a warp owns 16 query rows (their Q and dO fragments in registers); per key tile and
//     16-key chunk it recomputes S and dP and adds dS K to dQ, key tiles ascending. Its own kernel, so no
//     block waits for another and no atomics: every sum has one fixed order, and two runs are bit-identical.
// Every tile is copied in row-major by cp.async (16 bytes a thread, no registers on the way), the tiles a
// kernel walks through (K and V in forward and dQ, Q and dO in dK/dV) in two slots, so the next one's copy
// runs while this one is multiplied. Fragments come by ldmatrix x4; the B operands whose k runs over a tile's
// 64 rows (V in P V, dO in P^T dO, Q in dS^T Q, K in dS K) by ldmatrix.trans, which transposes them as it
// loads. Chunks of 16 rows that the causal mask hides from a warp's 16 rows entirely are skipped (their terms
// are exact zeros); a warp asks the mask per element only in a tile or chunk where it hides something
// (math::attention_box_masked: the diagonal's, a hidden span's), elsewhere (nearly all of a long sequence) it
// scores without it, to the same bits. These kernels gave the bits of the earlier ones (32-bit fragment loads
// from transposed copies, one slot, the mask asked everywhere) exactly in the emulator: every output of
// attention_emulated_test's tensor-core cases, host code at -O0 (at -O3 g++'s code for the emulation moved
// single scores by an ulp either way). Speed left for the profiler. An estimate from the code, not a
// measurement: with 16 rows a warp these kernels wait on shared memory more than on the tensor cores (an
// ldmatrix x4 moves 512 bytes, 4 cycles of an SM's 128 bytes a cycle, and feeds 2 m16n8k16 products of about a
// cycle each in forward and dQ; dK/dV reloads its fixed K and V fragments for every 16-query chunk, about one
// load a product: no registers are left for them at 236, while dQ keeps its Q and dO fragments, 221). The wide
// path (Path::MmaWide) takes FlashAttention-2's shapes with the same bits: forward_wide_mma_kernel, 32 rows a
// warp, each B fragment feeding two row tiles (80 ldmatrix for 256 products a key tile against 64 for 128;
// ptxas at sm_90a: 255 registers, 28 bytes spilled, against the 16-row forward's 231 and none), and
// dkdv_wide_mma_kernel, 8 warps over 128 keys with P^T and dS^T through shared memory (per warp and 64-query
// tile 144 ldmatrix and 32 4-byte stores for 256 products, against 192 ldmatrix for 256; 236 registers, none
// spilled). They wait for a GPU to say whether they are faster. Next: wgmma on sm_90a.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/math/bf16.h"
#include "core/math/softmax_backward.h"
#include "cuda/dynamic_shared.cuh"
#include "model/cuda/attention_grid.h"
#include "model/cuda/attention_params.cuh"
#include "model/cuda/mma_fragments.h"

namespace zero::model::cuda_attention::detail {
namespace {

using u16 = uint16_t;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kRows = kBlockQ;  // every tile has 64 rows (kBlockQ == kBlockK)
constexpr int kWarpRows = mma::kM;
static_assert(kBlockQ == kBlockK && kRows == kMmaWarps * kWarpRows, "4 warps of 16 rows cover a 64-row tile");

#if defined(ZERO_SIMT_EMULATION)
// Host emulation (tests/cuda/simt_emulator.h, which the includer includes first): the warp-collective
// product comes from the emulator; the bf16 pair packing is core/math's rounding, which cvt.rn matches
// for every finite value.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  simt::mma_m16n8k16_bf16(d, a, b);
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(math::f32_to_bf16(lo)) | uint32_t(math::f32_to_bf16(hi)) << 16;
}
#else
// D += A B on the tensor cores (one warp, all lanes together).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two floats rounded to bf16 (nearest, ties to even: core/math/bf16.h's rounding for every finite value)
// into one register, lo in the low half. cvt puts its first source in the high half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
#endif

// Shared-memory loads of four 8 x 8 bf16 matrices at once (ldmatrix; lane 8 i + j addresses row j of matrix i,
// register i of every lane comes from matrix i, transposed with trans: simt_emulator.h states the layout), and
// 16-byte global -> shared copies that bypass the registers (cp.async, zero-filled when !valid), waited for
// by group: wait<N> returns once at most N of the committed groups are still in flight.
#if defined(ZERO_SIMT_EMULATION)
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const u16* row) { simt::ldmatrix_x4(r, row, false); }
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const u16* row) { simt::ldmatrix_x4(r, row, true); }
__device__ __forceinline__ void cp_async16(u16* dst, const u16* src, bool valid) { simt::cp_async16(dst, src, valid); }
__device__ __forceinline__ void cp_async_commit() { simt::cp_async_commit(); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  simt::cp_async_wait(N);
}
#else
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const u16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const u16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}
// src-size 0 reads nothing and fills the 16 bytes with zeros.
__device__ __forceinline__ void cp_async16(u16* dst, const u16* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

__device__ __forceinline__ uint32_t load_word(const u16* p) { return *reinterpret_cast<const uint32_t*>(p); }

__device__ __forceinline__ void load_a(uint32_t (&a)[4], const u16* tile, int ld, int row0, int k0, int lane) {
#pragma unroll
  for (int r = 0; r < 4; ++r) a[r] = load_word(tile + mma::a_offset(lane, r, ld, row0, k0));
}
// The A fragment of the 16 x 16 matrix whose columns 0-7 are C fragment lo and 8-15 are hi, in bf16.
__device__ __forceinline__ void a_from_c_pair(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack_bf16(lo[0], lo[1]);
  a[1] = pack_bf16(lo[2], lo[3]);
  a[2] = pack_bf16(hi[0], hi[1]);
  a[3] = pack_bf16(hi[2], hi[3]);
}

template <int N>
__device__ __forceinline__ void zero(float (&c)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
}

// Queues the copy of `valid` rows of head `head` from token t0 on (token rows `row_stride` elements apart),
// each D bf16, into a row-major [Rows][D] tile of stride tile_stride(D); rows past `valid` are zero-filled. The
// lanes of a warp run along a row: each global read is a whole row's 2 D contiguous bytes. Threads: the
// block's (each copies every Threads-th vector). Rows: 64, or 128 for the wide kernels' Q (forward) and K, V
// (dK/dV), two 64-row tiles one after the other.
template <int D, int Threads = kMmaThreads, int Rows = kRows>
__device__ void copy_rows_async(const u16* __restrict__ x, int64_t row_stride, int64_t head, int64_t t0, int valid,
                                u16* __restrict__ tile) {
  constexpr int kVecs = D / 8, ld = mma::tile_stride(D);
  for (int e = threadIdx.x; e < Rows * kVecs; e += Threads) {
    const int r = e / kVecs, c = e % kVecs * 8;
    cp_async16(tile + r * ld + c, r < valid ? x + (t0 + r) * row_stride + head * D + c : x, r < valid);
  }
}

// Per-row lse (times log2 e: the exp2 domain) and D of a query tile into shared memory. Rows past the
// sequence get lse = +inf, so their probabilities are exactly 0 and their gradients vanish.
__device__ void copy_row_stats(const float* __restrict__ lse, const float* __restrict__ row_dot, const Params& p,
                               int64_t h, int64_t t0, int valid, float* lse_s, float* dot_s) {
  if (threadIdx.x < kRows) {
    const int i = threadIdx.x;
    const int64_t at = (t0 + i) * p.heads + h;
    lse_s[i] = i < valid ? lse[at] * kLog2e : INFINITY;
    dot_s[i] = i < valid ? row_dot[at] : 0.0f;
  }
}

// A tile of the kernel's shared memory by its byte offset (attention_grid.h's MmaSmem).
__device__ __forceinline__ u16* tile_at(int offset) { return reinterpret_cast<u16*>(kernels::dynamic_shared() + offset); }
__device__ __forceinline__ float* floats_at(int offset) {
  return reinterpret_cast<float*>(kernels::dynamic_shared() + offset);
}

// The two K / V slots of the forward and dQ kernels (a select, not an array: the pointers stay in registers),
// the key tiles a query tile sees, and the copy of key tile j (kv head g) into a slot.
__device__ __forceinline__ u16* k_slot(const MmaSmem& L, int slot) { return tile_at(slot ? L.k_next : L.k); }
__device__ __forceinline__ u16* v_slot(const MmaSmem& L, int slot) { return tile_at(slot ? L.v_next : L.v); }
__device__ __forceinline__ int64_t key_tiles(const TileRows& qr) { return (key_end(qr) + kBlockK - 1) / kBlockK; }
template <int D>
__device__ void copy_kv_tile(const u16* k, const u16* v, const Params& p, const Sequence& sq, int64_t g, int64_t j,
                             const MmaSmem& L, int slot) {
  const int nk = int(tile_rows(j, kBlockK, sq.len).count);
  copy_rows_async<D>(k, p.ld_k, g, sq.start + j * kBlockK, nk, k_slot(L, slot));
  copy_rows_async<D>(v, p.ld_v, g, sq.start + j * kBlockK, nk, v_slot(L, slot));
}

// Writes a warp's 16 x 8 NT accumulator rows (times row_scale[0] / [1] for its rows group and group + 8) as
// bf16 into rows t0 + row0 .. from column col0 on, rows < valid only.
template <int NT>
__device__ void store_columns(const float (&acc)[NT][4], const float (&row_scale)[2], u16* __restrict__ out,
                              int64_t row_stride, int64_t col0, int64_t t0, int row0, int valid, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + mma::c_index(lane, 2 * half).row;
    if (row >= valid) continue;
    u16* dst = out + (t0 + row) * row_stride + col0;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      *reinterpret_cast<uint32_t*>(dst + nt * 8 + mma::c_index(lane, 2 * half).col) =
          pack_bf16(acc[nt][2 * half] * row_scale[half], acc[nt][2 * half + 1] * row_scale[half]);
  }
}
// The whole head: a 16 x D accumulator into head `head`'s columns.
template <int D>
__device__ void store_rows(const float (&acc)[D / 8][4], const float (&row_scale)[2], u16* __restrict__ out,
                           int64_t row_stride, int64_t head, int64_t t0, int row0, int valid, int lane) {
  store_columns<D / 8>(acc, row_scale, out, row_stride, head * D, t0, row0, valid, lane);
}

// The two products a backward chunk recomputes, for one warp: x = A1 B1^T and y = A2 B2^T, A the warp's 16
// rows from a_row0 of the row-major [64][D] tiles a1, a2 and B the 16 rows from n0 of the row-major tiles
// b1, b2 (n-major as B operands), summed over the D columns. ldmatrix x4: A's matrices are rows + 8 (i % 2),
// columns + 8 (i / 2) (registers 0-3 of the A fragment); B's rows + 8 (i / 2), columns + 8 (i % 2) (registers
// 0, 1 for n0, 2, 3 for n0 + 8). The A fragments come from shared memory at every step (dK/dV: its K and V
// rows, no registers to spare) or from registers (dQ: its Q and dO rows, loaded once by load_a_rows).
__device__ __forceinline__ int a_row_address(int a_row0, int ld, int lane) {
  const int m_row = lane % 8, m_idx = lane / 8;
  return (a_row0 + m_row + 8 * (m_idx % 2)) * ld + 8 * (m_idx / 2);
}
// The B fragments of the 16 rows from n0 (two 8-row n-tiles) of a row-major [n][k] tile, one column step.
__device__ __forceinline__ int b_row_address(int n0, int ld, int lane) {
  const int m_row = lane % 8, m_idx = lane / 8;
  return (n0 + m_row + 8 * (m_idx / 2)) * ld + 8 * (m_idx % 2);
}
// One step kk of the columns: x += A1 B1^T, y += A2 B2^T over columns kk * 16 .. + 16.
template <int D>
__device__ __forceinline__ void chunk_step(float (&x)[2][4], float (&y)[2][4], const uint32_t (&fa1)[4],
                                           const uint32_t (&fa2)[4], const u16* b1, const u16* b2, int n0, int kk,
                                           int lane) {
  const int b_at = b_row_address(n0, mma::tile_stride(D), lane) + kk * 16;
  uint32_t fb1[4], fb2[4];
  ldsm_x4(fb1, b1 + b_at);
  ldsm_x4(fb2, b2 + b_at);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const uint32_t bx[2] = {fb1[2 * j], fb1[2 * j + 1]}, by[2] = {fb2[2 * j], fb2[2 * j + 1]};
    mma_bf16(x[j], fa1, bx);
    mma_bf16(y[j], fa2, by);
  }
}
template <int D>
__device__ __forceinline__ void chunk_products(float (&x)[2][4], float (&y)[2][4], const u16* a1, const u16* a2,
                                               int a_row0, const u16* b1, const u16* b2, int n0, int lane) {
  const int a_at = a_row_address(a_row0, mma::tile_stride(D), lane);
  zero(x);
  zero(y);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t fa1[4], fa2[4];
    ldsm_x4(fa1, a1 + a_at + kk * 16);
    ldsm_x4(fa2, a2 + a_at + kk * 16);
    chunk_step<D>(x, y, fa1, fa2, b1, b2, n0, kk, lane);
  }
}
template <int D>
__device__ __forceinline__ void chunk_products(float (&x)[2][4], float (&y)[2][4], const uint32_t (&fa1)[D / 16][4],
                                               const uint32_t (&fa2)[D / 16][4], const u16* b1, const u16* b2, int n0,
                                               int lane) {
  zero(x);
  zero(y);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) chunk_step<D>(x, y, fa1[kk], fa2[kk], b1, b2, n0, kk, lane);
}
// The A fragments of the warp's 16 rows from a_row0 of a row-major [64][D] tile, every column step.
template <int D>
__device__ __forceinline__ void load_a_rows(uint32_t (&f)[D / 16][4], const u16* tile, int a_row0, int lane) {
  const int a_at = a_row_address(a_row0, mma::tile_stride(D), lane);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) ldsm_x4(f[kk], tile + a_at + kk * 16);
}

// acc (the warp's 16 x D accumulator) += A B, A a 16 x 16 fragment over 16 of a tile's 64 rows (k0 on) and
// B those rows of the row-major [64][D] tile, transposed by ldmatrix as it is loaded (keys or queries as k,
// columns as n; matrices rows + 8 (i % 2), columns + 8 (i / 2): B registers 0, 1 at nt, 2, 3 at nt + 1):
// P V, P^T dO, dS^T Q and dS K alike.
// The columns from col0 on, 8 NT of them, of a tile of row stride ld (the wide dK/dV's warps each take half of
// the head's).
template <int NT>
__device__ __forceinline__ void add_product_columns(float (&acc)[NT][4], const uint32_t (&a)[4], const u16* tile,
                                                    int ld, int k0, int col0, int lane) {
  const u16* rows = tile + a_row_address(k0, ld, lane) + col0;
#pragma unroll
  for (int nt = 0; nt < NT; nt += 2) {
    uint32_t b[4];
    ldsm_x4_trans(b, rows + nt * 8);
    const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
    mma_bf16(acc[nt], a, b0);
    mma_bf16(acc[nt + 1], a, b1);
  }
}
template <int D>
__device__ __forceinline__ void add_product(float (&acc)[D / 8][4], const uint32_t (&a)[4], const u16* tile, int k0,
                                            int lane) {
  add_product_columns<D / 8>(acc, a, tile, mma::tile_stride(D), k0, 0, lane);
}

// One element of a backward chunk: P from the raw score (masked, into the exp2 domain, against the row's
// lse times log2 e) and dS = scale * P (dP - D) (softmax_backward.h). Both backward kernels, whichever of
// query and key their fragments' rows hold.
struct ProbGrad {
  float prob, ds;
};
__device__ __forceinline__ ProbGrad prob_and_dscore(float score, float dp, bool is_masked, float lse_log2,
                                                    float row_dot, const Params& p) {
  const float x = is_masked ? -INFINITY : score * p.scale_log2;
  const float prob = exp2f(x - lse_log2);
  return {prob, p.scale * math::softmax_grad(prob, dp, row_dot)};
}

// One 64-key tile of the online softmax for a warp's 16 query rows from row_first (FlashAttention-2's, in the
// exp2 domain): the raw scores s (C fragments; keys k0 ..) scaled by scale * log2 e and masked (per element only
// where the box needs it), the rows' running max and sum updated, acc rescaled to the new max, and s turned into
// the tile's probabilities against it, in place. Pos: the positions' integer type (the wide forward keeps them
// in 32 bits for its registers). Both forward kernels, the same bits.
template <int D, class Pos>
__device__ __forceinline__ void softmax_tile(float (&s)[kBlockK / 8][4], float (&row_max)[2], float (&row_sum)[2],
                                             float (&acc)[D / 8][4], Pos row_first, Pos k0, Pos hidden_begin,
                                             Pos hidden_end, float scale_log2, int lane) {
  // Scale, mask, and the tile's row maxima (a row's 64 scores lie in the 4 lanes of its quad: two shuffles).
  float tile_max[2] = {-INFINITY, -INFINITY};
  auto scale_and_mask = [&](auto check) {
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const mma::FragIndex e = mma::c_index(lane, i);
        const bool excluded = decltype(check)::value &&
                              math::attention_masked(row_first + e.row, k0 + nt * 8 + e.col, hidden_begin, hidden_end);
        const float x = excluded ? -INFINITY : s[nt][i] * scale_log2;
        s[nt][i] = x;
        tile_max[i / 2] = fmaxf(tile_max[i / 2], x);
      }
    }
  };
  if (math::attention_box_masked(row_first, row_first + kWarpRows - 1, k0, k0 + kBlockK - 1, hidden_begin, hidden_end))
    scale_and_mask(std::true_type{});
  else
    scale_and_mask(std::false_type{});
  float alpha[2], ref[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 1));
    tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 2));
    const float m_new = fmaxf(row_max[half], tile_max[half]);
    ref[half] = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing seen yet: exp2(-inf - 0) = 0
    alpha[half] = exp2f(row_max[half] - ref[half]);
    row_max[half] = m_new;
  }
  float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[nt][i] = exp2f(s[nt][i] - ref[i / 2]);
      tile_sum[i / 2] += s[nt][i];
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    tile_sum[half] += __shfl_xor_sync(0xffffffffu, tile_sum[half], 1);
    tile_sum[half] += __shfl_xor_sync(0xffffffffu, tile_sum[half], 2);
    row_sum[half] = row_sum[half] * alpha[half] + tile_sum[half];
  }
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) {
    acc[nt][0] *= alpha[0], acc[nt][1] *= alpha[0];
    acc[nt][2] *= alpha[1], acc[nt][3] *= alpha[1];
  }
}

// ---------------------------------------------------------------------------------------------------
// Forward: one block per (sequence, query head, query tile), as forward_kernel.
template <int D>
__global__ void __launch_bounds__(kMmaThreads)
    forward_mma_kernel(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v, Params p,
                       u16* __restrict__ o, float* __restrict__ lse) {
  constexpr int ld = mma::tile_stride(D);
  const BlockCoord bc = row_block(blockIdx.x, p.num_seqs, p.heads, p.max_seqlen);
  const Sequence sq = sequence(p, bc.seq);
  const TileRows qr = tile_rows(bc.block, kBlockQ, sq.len);
  if (qr.count <= 0) return;  // past this sequence's end (the whole block leaves together)
  const int nq = int(qr.count), warp = threadIdx.x / 32, lane = threadIdx.x % 32, row0 = warp * kWarpRows;
  const int64_t h = bc.head, g = h / p.r, q0 = qr.first;
  // Two slots of K and V tiles (row-major): tile j + 1 is copied in (cp.async) while tile j is multiplied.
  // The Q tile passes through slot 1, which the first prefetch overwrites once Q is in registers.
  const MmaSmem L = mma_smem(MmaKernel::Forward, D);
  const int64_t tiles = key_tiles(qr);
  copy_rows_async<D>(q, p.ld_q, h, sq.start + q0, nq, tile_at(L.q));
  copy_kv_tile<D>(k, v, p, sq, g, 0, L, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) load_a(qf[kk], tile_at(L.q), ld, row0, kk * 16, lane);
  __syncthreads();  // Q is in every warp's registers before slot 1 takes keys

  // ldmatrix row addresses of this lane: row lane % 8 of matrix lane / 8.
  const int m_row = lane % 8, m_idx = lane / 8;
  float acc[D / 8][4];
  zero(acc);
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};  // rows group, group + 8
  for (int64_t j = 0; j < tiles; ++j) {
    const int slot = int(j & 1);
    if (j + 1 < tiles) copy_kv_tile<D>(k, v, p, sq, g, j + 1, L, slot ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // tile j has landed (tile j + 1 may still be in flight)
    __syncthreads();
    const int64_t k0 = j * kBlockK;
    const u16* kt = k_slot(L, slot);
    const u16* vt = v_slot(L, slot);

    float s[kBlockK / 8][4];  // S = Q K^T for the warp's 16 rows x 64 keys
    zero(s);
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
      for (int kk = 0; kk < D / 16; kk += 2) {
        // Keys nt*8.. (n) by columns kk*16.. (k): matrices 0, 1 are B registers 0, 1 at kk, 2, 3 at kk + 1.
        uint32_t b[4];
        ldsm_x4(b, kt + (nt * 8 + m_row) * ld + kk * 16 + m_idx * 8);
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        mma_bf16(s[nt], qf[kk], b0);
        mma_bf16(s[nt], qf[kk + 1], b1);
      }
    }
    // The online softmax (masked only where the tile crosses the warp's diagonal or a hidden span).
    softmax_tile<D>(s, row_max, row_sum, acc, q0 + row0, k0, sq.hidden_begin, sq.hidden_end, p.scale_log2, lane);
    // acc += P V: P's C fragments are the A operand (bf16), V the B operand (transposed as it is loaded).
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      uint32_t a[4];
      a_from_c_pair(a, s[2 * kk], s[2 * kk + 1]);
      add_product<D>(acc, a, vt, kk * 16, lane);
    }
    __syncthreads();  // every warp is done with this slot before tile j + 2 is copied into it
  }

  // Every live row saw key 0, so its sum is at least 1 (the max's own term).
  const float inv[2] = {1.0f / row_sum[0], 1.0f / row_sum[1]};
  store_rows<D>(acc, inv, o, p.ld_q, h, sq.start + q0, row0, nq, lane);
  if (mma::lane_quad(lane) == 0) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + mma::c_index(lane, 2 * half).row;
      if (row < nq) lse[(sq.start + q0 + row) * p.heads + h] = (row_max[half] + log2f(row_sum[half])) * kLn2;
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Forward, wide (Path::MmaWide): one block per (sequence, query head, 128-row query block), each warp 32 rows
// as two 16-row tiles r = 0, 1. Per key tile and column step, one ldmatrix of K (and per key chunk one of V)
// feeds both tiles' products: 0.31 shared-memory loads a product against 0.5 for the 16-row kernel, whose Q
// fragments sit in registers; here the accumulators (2 x D / 8 fragments) leave no room for Q's, so its
// fragments come from the Q tile, which stays in shared memory. Every row's sums are the 16-row kernel's, in
// its order: S over column steps ascending, the online softmax per 64-key tile, P V over key chunks
// ascending. A key tile that lies wholly past a warp's last row (the second diagonal tile for warps 0 and 1)
// is skipped: there its scores would all be masked, alpha exactly 1 and P exactly 0, so the result is the
// same bits; so are warps whose rows all lie past the sequence end (never stored).
template <int D>
__global__ void __launch_bounds__(kMmaThreads)
    forward_wide_mma_kernel(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v, Params p,
                            u16* __restrict__ o, float* __restrict__ lse) {
  constexpr int ld = mma::tile_stride(D), R = kWideRowTiles;
  const BlockCoord bc = row_block(blockIdx.x, p.num_seqs, p.heads, p.max_seqlen, kWideBlockQ);
  const Sequence sq = sequence(p, bc.seq);
  const TileRows qr = tile_rows(bc.block, kWideBlockQ, sq.len);
  if (qr.count <= 0) return;  // past this sequence's end (the whole block leaves together)
  const int nq = int(qr.count), warp = threadIdx.x / 32, lane = threadIdx.x % 32, row0 = warp * kWideWarpRows;
  // Positions inside the sequence in 32 bits (max_seqlen is an int32): registers are this kernel's limit.
  const int64_t h = bc.head, g = h / p.r;
  const int q0 = int(qr.first);
  const MmaSmem L = mma_smem(MmaKernel::ForwardWide, D);
  const u16* const qt = tile_at(L.q);
  const int tiles = int(key_tiles(qr));
  const int hidden_begin = int(sq.hidden_begin), hidden_end = int(sq.hidden_end);
  // The Q tile's 128 rows (rows past nq zero-filled), then K and V tile 0.
  copy_rows_async<D, kMmaThreads, kWideBlockQ>(q, p.ld_q, h, sq.start + q0, nq, tile_at(L.q));
  copy_kv_tile<D>(k, v, p, sq, g, 0, L, 0);
  cp_async_commit();
  // Whether this warp computes at all (warp-uniform), and its last key tile (the one holding its last row).
  const bool live = row0 < nq;
  const int warp_last_key = q0 + row0 + kWideWarpRows - 1;

  const int a_at = a_row_address(row0, ld, lane);  // Q's A fragments of tile r: + r * 16 rows
  float acc[R][D / 8][4];
#pragma unroll
  for (int r = 0; r < R; ++r) zero(acc[r]);
  float row_max[R][2], row_sum[R][2];  // rows group, group + 8 of each tile
#pragma unroll
  for (int r = 0; r < R; ++r) row_max[r][0] = row_max[r][1] = -INFINITY, row_sum[r][0] = row_sum[r][1] = 0.0f;
  for (int j = 0; j < tiles; ++j) {
    const int slot = int(j & 1);
    if (j + 1 < tiles) copy_kv_tile<D>(k, v, p, sq, g, j + 1, L, slot ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // tile j (and, at j = 0, Q) has landed
    __syncthreads();
    const int k0 = j * kBlockK;
    if (live && k0 <= warp_last_key) {
      const u16* kt = k_slot(L, slot);
      const u16* vt = v_slot(L, slot);
      float s[R][kBlockK / 8][4];  // S = Q K^T for the warp's 2 x 16 rows x 64 keys
#pragma unroll
      for (int r = 0; r < R; ++r) zero(s[r]);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[R][4];  // Q's A fragments of columns kk * 16 ..
#pragma unroll
        for (int r = 0; r < R; ++r) ldsm_x4(qa[r], qt + a_at + r * 16 * ld + kk * 16);
#pragma unroll
        for (int nt = 0; nt < kBlockK / 8; nt += 2) {
          // Keys nt*8.. (n) by columns kk*16.. (k): matrices 0, 1 are B registers 0, 1 of keys nt*8.., 2, 3 of
          // keys nt*8 + 8...
          uint32_t b[4];
          ldsm_x4(b, kt + b_row_address(nt * 8, ld, lane) + kk * 16);
          const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
          for (int r = 0; r < R; ++r) {
            mma_bf16(s[r][nt], qa[r], b0);
            mma_bf16(s[r][nt + 1], qa[r], b1);
          }
        }
      }
      uint32_t pa[R][kBlockK / 16][4];  // P in bf16 as A fragments, per 16-key chunk
#pragma unroll
      for (int r = 0; r < R; ++r) {
        softmax_tile<D>(s[r], row_max[r], row_sum[r], acc[r], q0 + row0 + r * 16, k0, hidden_begin, hidden_end,
                        p.scale_log2, lane);
#pragma unroll
        for (int kc = 0; kc < kBlockK / 16; ++kc) a_from_c_pair(pa[r][kc], s[r][2 * kc], s[r][2 * kc + 1]);
      }
      // acc += P V: one transposed V fragment (16 keys x 16 columns) feeds both tiles' products.
#pragma unroll
      for (int kc = 0; kc < kBlockK / 16; ++kc) {
        const u16* rows = vt + a_row_address(kc * 16, ld, lane);  // transposed: V's rows are k
#pragma unroll
        for (int nt = 0; nt < D / 8; nt += 2) {
          uint32_t b[4];
          ldsm_x4_trans(b, rows + nt * 8);
          const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
          for (int r = 0; r < R; ++r) {
            mma_bf16(acc[r][nt], pa[r][kc], b0);
            mma_bf16(acc[r][nt + 1], pa[r][kc], b1);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with this slot before tile j + 2 is copied into it
  }

  if (!live) return;
  // Every live row saw key 0, so its sum is at least 1 (the max's own term).
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int tile_row0 = row0 + r * 16;
    const float inv[2] = {1.0f / row_sum[r][0], 1.0f / row_sum[r][1]};
    store_rows<D>(acc[r], inv, o, p.ld_q, h, sq.start + q0, tile_row0, nq, lane);
    if (mma::lane_quad(lane) == 0) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = tile_row0 + mma::c_index(lane, 2 * half).row;
        if (row < nq) lse[(sq.start + q0 + row) * p.heads + h] = (row_max[r][half] + log2f(row_sum[r][half])) * kLn2;
      }
    }
  }
}

// P^T and dS^T in place of S^T and dP^T for a warp's 16-key x 16-query chunk: C fragments of keys key_first ..
// (rows) by queries q0 + 16 qc .. (columns; lse_s and dot_s hold the tile's row stats from q0), the mask asked
// per element only where the chunk needs it. Pos: the positions' integer type. Both dK/dV kernels.
template <class Pos>
__device__ __forceinline__ void chunk_probs_t(float (&st)[2][4], float (&dpt)[2][4], int qc, Pos q0, Pos key_first,
                                              Pos hidden_begin, Pos hidden_end, const float* lse_s, const float* dot_s,
                                              const Params& p, int lane) {
  auto probs = [&](auto check) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const mma::FragIndex e = mma::c_index(lane, i);
        const int query = qc * 16 + j * 8 + e.col;
        const bool excluded = decltype(check)::value &&
                              math::attention_masked(q0 + query, key_first + e.row, hidden_begin, hidden_end);
        const ProbGrad r = prob_and_dscore(st[j][i], dpt[j][i], excluded, lse_s[query], dot_s[query], p);
        st[j][i] = r.prob;
        dpt[j][i] = r.ds;
      }
    }
  };
  if (math::attention_box_masked(q0 + qc * 16, q0 + qc * 16 + 15, key_first, key_first + 15, hidden_begin, hidden_end))
    probs(std::true_type{});
  else
    probs(std::false_type{});
}

// ---------------------------------------------------------------------------------------------------
// The (query head, query tile) pairs a dK/dV block visits: heads of its group ascending, tiles from the first that
// sees key k0 (first_query_start), their Q and dO tiles in two slots (the next pair's cp.async copy runs while
// this one is used), copied by the block's Threads threads. Both dK/dV kernels walk them alike.
template <int D, int Threads>
struct PairWalk {
  struct Pair {
    int64_t h, q0;
  };
  const u16* q;
  const u16* d_o;
  const Params& p;
  const Sequence& sq;
  const MmaSmem& L;
  int64_t first_q0, h_end;

  __device__ PairWalk(const u16* q_, const u16* d_o_, const Params& p_, const Sequence& sq_, const MmaSmem& L_,
                      int64_t g, int64_t k0)
      : q(q_), d_o(d_o_), p(p_), sq(sq_), L(L_), first_q0(first_query_start(k0)), h_end((g + 1) * p_.r) {}
  __device__ Pair first(int64_t g) const { return {g * p.r, first_q0}; }
  __device__ Pair next(Pair x) const {
    return x.q0 + kBlockQ < sq.len ? Pair{x.h, x.q0 + kBlockQ} : Pair{x.h + 1, first_q0};
  }
  __device__ bool valid(Pair x) const { return x.h < h_end && x.q0 < sq.len; }  // first_q0 past the end: none
  // Selects, not an array: the pointers stay in registers.
  __device__ u16* q_slot(int slot) const { return tile_at(slot ? L.q_next : L.q); }
  __device__ u16* d_o_slot(int slot) const { return tile_at(slot ? L.d_o_next : L.d_o); }
  __device__ int rows(Pair x) const { return int(tile_rows(x.q0 / kBlockQ, kBlockQ, sq.len).count); }
  __device__ void copy(Pair x, int slot) const {
    const int n = rows(x);
    copy_rows_async<D, Threads>(q, p.ld_q, x.h, sq.start + x.q0, n, q_slot(slot));
    copy_rows_async<D, Threads>(d_o, p.ld_q, x.h, sq.start + x.q0, n, d_o_slot(slot));
  }
  // The start of pair `cur` in `slot`, for every thread of the block: queues the next pair's copy into the other
  // slot, puts this pair's row stats in shared memory and waits until its tiles (and K, V) have landed.
  __device__ void begin(Pair cur, int slot, const float* lse, const float* row_dot, float* lse_s, float* dot_s) const {
    const Pair after = next(cur);
    if (valid(after)) copy(after, slot ^ 1);
    cp_async_commit();
    copy_row_stats(lse, row_dot, p, cur.h, sq.start + cur.q0, rows(cur), lse_s, dot_s);
    cp_async_wait<1>();
    __syncthreads();
  }
};

// ---------------------------------------------------------------------------------------------------
// Backward, dK and dV: one block per (sequence, kv head, key tile), as dkdv_kernel; the warp's 16 keys. The
// (query head, query tile) pairs are visited in dkdv_kernel's order, their Q and dO tiles in two slots: the
// next pair's cp.async copy runs while this one is multiplied.
template <int D>
__global__ void __launch_bounds__(kMmaThreads)
    dkdv_mma_kernel(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                    const u16* __restrict__ d_o, const float* __restrict__ lse, const float* __restrict__ row_dot,
                    Params p, u16* __restrict__ dk, u16* __restrict__ dv) {
  const BlockCoord bc = column_block(blockIdx.x, p.num_seqs, p.kv_heads);
  const Sequence sq = sequence(p, bc.seq);
  const TileRows kr = tile_rows(bc.block, kBlockK, sq.len);
  if (kr.count <= 0) return;
  const int nk = int(kr.count), warp = threadIdx.x / 32, lane = threadIdx.x % 32, key0 = warp * kWarpRows;
  const int64_t g = bc.head, k0 = kr.first;
  const MmaSmem L = mma_smem(MmaKernel::DkDv, D);
  const u16* const kt = tile_at(L.k);
  const u16* const vt = tile_at(L.v);
  float* const lse_s = floats_at(L.lse);
  float* const dot_s = floats_at(L.row_dot);
  const PairWalk<D, kMmaThreads> walk(q, d_o, p, sq, L, g, k0);

  copy_rows_async<D>(k, p.ld_k, g, sq.start + k0, nk, tile_at(L.k));
  copy_rows_async<D>(v, p.ld_v, g, sq.start + k0, nk, tile_at(L.v));
  auto cur = walk.first(g);
  if (walk.valid(cur)) walk.copy(cur, 0);
  cp_async_commit();
  float dk_acc[D / 8][4], dv_acc[D / 8][4];
  zero(dk_acc);
  zero(dv_acc);

  for (int slot = 0; walk.valid(cur); cur = walk.next(cur), slot ^= 1) {
    const int64_t q0 = cur.q0;
    walk.begin(cur, slot, lse, row_dot, lse_s, dot_s);
    const u16* qt = walk.q_slot(slot);
    const u16* d_ot = walk.d_o_slot(slot);
#pragma unroll 1
    for (int qc = 0; qc < kRows / 16; ++qc) {
      if (k0 + key0 > q0 + qc * 16 + 15) continue;  // every query of the chunk precedes the warp's keys
      float st[2][4], dpt[2][4];  // S^T = K Q^T and dP^T = V dO^T: the warp's 16 keys x the chunk's 16 queries
      chunk_products<D>(st, dpt, kt, vt, key0, qt, d_ot, qc * 16, lane);
      chunk_probs_t(st, dpt, qc, q0, k0 + key0, sq.hidden_begin, sq.hidden_end, lse_s, dot_s, p, lane);
      uint32_t a[4];
      a_from_c_pair(a, st[0], st[1]);  // P^T: dV += P^T dO
      add_product<D>(dv_acc, a, d_ot, qc * 16, lane);
      a_from_c_pair(a, dpt[0], dpt[1]);  // dS^T: dK += dS^T Q
      add_product<D>(dk_acc, a, qt, qc * 16, lane);
    }
    __syncthreads();  // every warp is done with this slot and the row stats before the next pair's
  }
  const float one[2] = {1.0f, 1.0f};
  store_rows<D>(dk_acc, one, dk, p.ld_k, g, sq.start + k0, key0, nk, lane);
  store_rows<D>(dv_acc, one, dv, p.ld_dv, g, sq.start + k0, key0, nk, lane);
}

// ---------------------------------------------------------------------------------------------------
// Backward, dK and dV, wide (Path::MmaWide): one block of 8 warps per (sequence, kv head, 128-key block),
// FlashAttention-2's backward shape. Warp w owns keys 32 (w / 2) .. + 32 (two 16-key m-tiles) in both phases
// of each (query head, 64-query tile) pair:
//   1. S^T = K Q^T and dP^T = V dO^T for its keys x queries 32 (w % 2) .. + 32 (two 16-query chunks): per
//      column step two K (V) and two Q (dO) fragments feed 4 products each, where dkdv_mma_kernel's 16-key
//      warps loaded one of each for 2. P^T and dS^T (softmax_backward.h) go to shared memory in bf16, each
//      element where a_from_c_pair would have put it.
//   2. dV += P^T dO and dK += dS^T Q for its keys x columns (D / 2) (w % 2) .. + D / 2, the A fragments from
//      shared memory, query chunks ascending.
// Each element of dK and dV gets dkdv_mma_kernel's products in its order (pairs as it visits them, chunks
// ascending, a key m-tile's chunk skipped exactly where that kernel's warp skips it: every query of the chunk
// precedes every key of the m-tile; the keys of the block's upper half skip all of its first query tile, which
// dkdv_mma_kernel's block for them does not visit), and each of S^T and dP^T its column steps in its order: the
// same bits. Shared memory 172.5 KiB at head_dim 128 (one block an SM: an H100's 227 KiB, not an A100's 163).
template <int D>
__global__ void __launch_bounds__(kWideDkDvThreads)
    dkdv_wide_mma_kernel(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                         const u16* __restrict__ d_o, const float* __restrict__ lse, const float* __restrict__ row_dot,
                         Params p, u16* __restrict__ dk, u16* __restrict__ dv) {
  constexpr int ld = mma::tile_stride(D), ldp = mma::tile_stride(kBlockQ), T = kWideDkDvThreads;
  constexpr int NT = D / 16;  // 8-column n-tiles of half the head
  const BlockCoord bc = column_block(blockIdx.x, p.num_seqs, p.kv_heads);
  const Sequence sq = sequence(p, bc.seq);
  const TileRows kr = tile_rows(bc.block, kWideBlockK, sq.len);
  if (kr.count <= 0) return;
  const int nk = int(kr.count), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int key_w = warp / 2 * kWideKeyRows;  // the warp's first key in the block
  const int half = warp % 2;                  // its queries of a tile (phase 1), its columns (phase 2)
  const int64_t g = bc.head;
  const int k0 = int(kr.first);
  const int hidden_begin = int(sq.hidden_begin), hidden_end = int(sq.hidden_end);
  const MmaSmem L = mma_smem(MmaKernel::DkDvWide, D);
  u16* const kt = tile_at(L.k);
  u16* const vt = tile_at(L.v);
  u16* const pt = tile_at(L.p_t);
  u16* const dst = tile_at(L.ds_t);
  float* const lse_s = floats_at(L.lse);
  float* const dot_s = floats_at(L.row_dot);
  // The pairs as dkdv_mma_kernel visits them, from the block's first key on.
  const PairWalk<D, T> walk(q, d_o, p, sq, L, g, k0);
  // K and V, 128 rows each (rows past nk zero-filled).
  copy_rows_async<D, T, kWideBlockK>(k, p.ld_k, g, sq.start + k0, nk, kt);
  copy_rows_async<D, T, kWideBlockK>(v, p.ld_v, g, sq.start + k0, nk, vt);
  auto cur = walk.first(g);
  if (walk.valid(cur)) walk.copy(cur, 0);
  cp_async_commit();
  float dk_acc[2][NT][4], dv_acc[2][NT][4];  // the warp's two key m-tiles x its D / 2 columns
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) zero(dk_acc[mt]), zero(dv_acc[mt]);
  const bool live = key_w < nk;  // warp-uniform: a warp whose keys all lie past the end only keeps the barriers
  const int col0 = half * (D / 2);  // the warp's columns in phase 2

  for (int slot = 0; walk.valid(cur); cur = walk.next(cur), slot ^= 1) {
    const int q0 = int(cur.q0);
    walk.begin(cur, slot, lse, row_dot, lse_s, dot_s);
    const u16* qt = walk.q_slot(slot);
    const u16* d_ot = walk.d_o_slot(slot);
    // Whether key m-tile mt of the warp sees any query of the tile's 16-query chunk qc (else all its P are 0).
    auto sees = [&](int mt, int qc) { return k0 + key_w + mt * 16 <= q0 + qc * 16 + 15; };

    if (live) {  // phase 1: S^T and dP^T of the warp's 32 keys x 32 queries, then P^T and dS^T into shared memory
      const int qc0 = half * 2;  // the warp's first 16-query chunk
      float st[2][2][2][4], dpt[2][2][2][4];  // [key m-tile][query chunk][8-query n-tile]
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int c = 0; c < 2; ++c) zero(st[mt][c]), zero(dpt[mt][c]);
      // x += A B^T over the columns: A the warp's key rows of a (K or V), B the warp's query rows of b (Q or dO).
      auto products = [&](float (&x)[2][2][2][4], const u16* a, const u16* b) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t fa[2][4], fb[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) ldsm_x4(fa[mt], a + a_row_address(key_w + mt * 16, ld, lane) + kk * 16);
#pragma unroll
          for (int c = 0; c < 2; ++c) ldsm_x4(fb[c], b + b_row_address((qc0 + c) * 16, ld, lane) + kk * 16);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              if (!sees(mt, qc0 + c)) continue;
#pragma unroll
              for (int j = 0; j < 2; ++j) {
                const uint32_t fbj[2] = {fb[c][2 * j], fb[c][2 * j + 1]};
                mma_bf16(x[mt][c][j], fa[mt], fbj);
              }
            }
          }
        }
      };
      products(st, kt, qt);
      products(dpt, vt, d_ot);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int qc = qc0 + c, key_m = key_w + mt * 16;
          if (!sees(mt, qc)) continue;
          chunk_probs_t(st[mt][c], dpt[mt][c], qc, q0, k0 + key_m, hidden_begin, hidden_end, lse_s, dot_s, p, lane);
          // C element (row, col) -> [key_m + row][qc * 16 + 8 j + col]: the A fragment a_from_c_pair makes.
#pragma unroll
          for (int j = 0; j < 2; ++j) {
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const mma::FragIndex e = mma::c_index(lane, 2 * hf);
              const int at = (key_m + e.row) * ldp + qc * 16 + j * 8 + e.col;
              *reinterpret_cast<uint32_t*>(pt + at) = pack_bf16(st[mt][c][j][2 * hf], st[mt][c][j][2 * hf + 1]);
              *reinterpret_cast<uint32_t*>(dst + at) = pack_bf16(dpt[mt][c][j][2 * hf], dpt[mt][c][j][2 * hf + 1]);
            }
          }
        }
      }
    }
    __syncthreads();  // P^T and dS^T of every warp are in shared memory

    if (live) {  // phase 2: dV += P^T dO, dK += dS^T Q for the warp's keys x its half of the columns
#pragma unroll
      for (int qc = 0; qc < kBlockQ / 16; ++qc) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          if (!sees(mt, qc)) continue;
          const int a_at = a_row_address(key_w + mt * 16, ldp, lane) + qc * 16;
          uint32_t a[4];
          ldsm_x4(a, pt + a_at);
          add_product_columns<NT>(dv_acc[mt], a, d_ot, ld, qc * 16, col0, lane);
          ldsm_x4(a, dst + a_at);
          add_product_columns<NT>(dk_acc[mt], a, qt, ld, qc * 16, col0, lane);
        }
      }
    }
    __syncthreads();  // every warp is done with this slot, P^T, dS^T and the row stats before the next pair's
  }
  if (!live) return;
  const float one[2] = {1.0f, 1.0f};
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    store_columns<NT>(dk_acc[mt], one, dk, p.ld_k, g * D + col0, sq.start + k0, key_w + mt * 16, nk, lane);
    store_columns<NT>(dv_acc[mt], one, dv, p.ld_dv, g * D + col0, sq.start + k0, key_w + mt * 16, nk, lane);
  }
}

// ---------------------------------------------------------------------------------------------------
// Backward, dQ: one block per (sequence, query head, query tile), as dq_kernel; the warp's 16 queries. K and V
// tiles in two slots, as in forward.
template <int D>
__global__ void __launch_bounds__(kMmaThreads)
    dq_mma_kernel(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                  const u16* __restrict__ d_o, const float* __restrict__ lse, const float* __restrict__ row_dot,
                  Params p, u16* __restrict__ dq) {
  const BlockCoord bc = row_block(blockIdx.x, p.num_seqs, p.heads, p.max_seqlen);
  const Sequence sq = sequence(p, bc.seq);
  const TileRows qr = tile_rows(bc.block, kBlockQ, sq.len);
  if (qr.count <= 0) return;
  const int nq = int(qr.count), warp = threadIdx.x / 32, lane = threadIdx.x % 32, row0 = warp * kWarpRows;
  const int64_t h = bc.head, g = h / p.r, q0 = qr.first;
  const MmaSmem L = mma_smem(MmaKernel::Dq, D);
  const u16* const qt = tile_at(L.q);
  const u16* const d_ot = tile_at(L.d_o);
  float* const lse_s = floats_at(L.lse);
  float* const dot_s = floats_at(L.row_dot);

  copy_rows_async<D>(q, p.ld_q, h, sq.start + q0, nq, tile_at(L.q));
  copy_rows_async<D>(d_o, p.ld_q, h, sq.start + q0, nq, tile_at(L.d_o));
  copy_kv_tile<D>(k, v, p, sq, g, 0, L, 0);
  cp_async_commit();
  copy_row_stats(lse, row_dot, p, h, sq.start + q0, nq, lse_s, dot_s);
  cp_async_wait<0>();
  __syncthreads();
  // The warp's Q and dO rows, the A operands of every chunk's S and dP, in registers for the whole kernel
  // (loaded once, not per chunk: half the shared-memory reads of those products).
  uint32_t qf[D / 16][4], d_of[D / 16][4];
  load_a_rows<D>(qf, qt, row0, lane);
  load_a_rows<D>(d_of, d_ot, row0, lane);
  float acc[D / 8][4];
  zero(acc);

  const int64_t tiles = key_tiles(qr);
  for (int64_t j = 0; j < tiles; ++j) {
    const int slot = int(j & 1);
    if (j + 1 < tiles) copy_kv_tile<D>(k, v, p, sq, g, j + 1, L, slot ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // tile j has landed
    __syncthreads();
    const int64_t k0 = j * kBlockK;
    const u16* kt = k_slot(L, slot);
    const u16* vt = v_slot(L, slot);
#pragma unroll 1
    for (int kc = 0; kc < kRows / 16; ++kc) {
      if (k0 + kc * 16 > q0 + row0 + 15) continue;  // every key of the chunk follows the warp's queries
      float s[2][4], dp[2][4];  // S = Q K^T and dP = dO V^T: the warp's 16 queries x the chunk's 16 keys
      chunk_products<D>(s, dp, qf, d_of, kt, vt, kc * 16, lane);
      auto score_grads = [&](auto check) {  // the mask asked per element only where the chunk needs it
#pragma unroll
        for (int j2 = 0; j2 < 2; ++j2) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const mma::FragIndex e = mma::c_index(lane, i);
            const int row = row0 + e.row;
            const bool excluded = decltype(check)::value && masked(sq, q0 + row, k0 + kc * 16 + j2 * 8 + e.col);
            s[j2][i] = prob_and_dscore(s[j2][i], dp[j2][i], excluded, lse_s[row], dot_s[row], p).ds;
          }
        }
      };
      if (box_masked(sq, q0 + row0, kWarpRows, k0 + kc * 16, 16)) score_grads(std::true_type{});
      else score_grads(std::false_type{});
      uint32_t a[4];
      a_from_c_pair(a, s[0], s[1]);  // dQ += dS K
      add_product<D>(acc, a, kt, kc * 16, lane);
    }
    __syncthreads();  // every warp is done with this slot before tile j + 2 is copied into it
  }
  const float one[2] = {1.0f, 1.0f};
  store_rows<D>(acc, one, dq, p.ld_q, h, sq.start + q0, row0, nq, lane);
}

}  // namespace
}  // namespace zero::model::cuda_attention::detail
