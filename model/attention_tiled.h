// Causal grouped-query attention over variable-length sequences, computed tile by tile the way the
// CUDA FlashAttention-2 kernels will: online softmax over key blocks, no T x T matrix anywhere (at most
// one block_q x block_k tile), the log-sum-exp kept for backward, a deterministic backward. This is the
// CPU emulation of those kernels, written so that each kernel can be a transcription of it; it is
// tested against the CPU backend's eager attention (model/cpu/attention_reference.h).
//
// Layout (token-major: the memory of torch's [N, heads, head_dim], as every ModelOps activation):
//   q, o, dq: q[(t*heads + h)*d + i];  k, v, dk, dv: k[(t*kv_heads + g)*d + i];  lse: lse[t*heads + h].
// Query head h reads kv head g = h / r, r = heads / kv_heads. cu_seqlens (S+1 offsets, cu_seqlens[0] = 0)
// lays S sequences end to end in N = cu_seqlens[S] tokens; each attends causally within itself, minus its
// hidden span (hidden: begin, end per sequence, or empty for none; core/math/attention_mask.h). Positions
// below are within the sequence; a sequence of length L has ceil(L / block_q) query blocks.
//
// Forward. One CUDA thread block per (sequence, query head h, query block qb); it owns the Q tile
// [block_q, d], the output accumulator acc [block_q, d] and one SoftmaxRow (m, l) per query row:
//   for kb = 0 .. the key block holding the block's last query (later key blocks are fully masked: skipped)
//     S = scale * Q K^T                               [block_q, block_k], K and V of kv head h / r
//     if the tile crosses the diagonal or meets the hidden span: S = -inf where the mask says (this also
//       masks keys past the sequence end, which only a diagonal tile can hold; their loads are zero-filled;
//       a row the mask hides a whole tile from rescales by exp(0) and adds zeros)
//     per row: alpha = online_softmax_rescale(row, max S); P = online_softmax_accept(row, S)
//     acc = alpha * acc + P V
//   O = acc / l; lse = m + log(l)                    (rows past the sequence end are neither computed
//                                                     nor stored)
//
// Backward (FlashAttention-2). Pass 1, one thread per (token, head): D = rowsum(dO * O).
// Pass 2, one CUDA thread block per (sequence, kv head g, key block kb); it owns the K and V tiles
// [block_k, d] and the dK, dV accumulators [block_k, d], so dK and dV are summed in registers in one
// fixed order (the r query heads of g ascending, then query blocks ascending) and written once:
//   for h in g*r .. g*r + r - 1
//     for qb = the block holding query kb*block_k (the first that sees the key block) .. last
//       S = scale * Q K^T, masked as in forward;  P = exp(S - lse)     (recomputed, nothing stored)
//       dV += P^T dO
//       dP = dO V^T;  dS = scale * P * (dP - D)  (softmax_grad; scale folded in: dS is d/d(q.k))
//       dK += dS^T Q
//       dQ[qb] += dS K                              (ordered, see below)
//
// dQ's determinism: query block qb receives one [block_q, d] contribution from each key block
// kb = 0 .. kb_last(qb), and this emulation adds them into the fp32 dQ buffer in increasing kb. The
// kernel keeps that order with a per-(sequence, head, query block) counter in global memory: the thread
// block of key block kb waits until the counter equals kb, adds its tile, fences, and increments it
// (every key block before kb also contributes to qb, so the counter passes through every value).
// A separate dQ kernel (one thread block per query block, key blocks ascending, recomputing S and dP)
// would add in the same order, at the cost of two more tile products per tile; no atomics either way.
//
// Rounding. Every tile product (Q K^T, P V, P^T dO, dO V^T, dS^T Q, dS K) and each row's exp-sum l is
// summed in a fresh tile partial in ascending index order and then added to its running accumulator: a
// two-level sum whose error grows like sqrt(tile + n / tile) instead of sqrt(n) over n keys or queries.
// It is what keeps fp32 within 1e-6 of exact attention at length 2048: with single running sums, dK and
// dV measured 1.4e-6 relative L2 error against fp64 there, with the partials 3-5e-7. On the GPU the same
// is an MMA into a zeroed fragment followed by a fragment add (the MMA's own k-steps, which sum 8 or 16
// products before each accumulate, already shorten the chain in the same way).
#pragma once
#include <cstdint>
#include <span>

#include "model/attention.h"

namespace zero::model {

// The CUDA kernels' tile sizes: query rows per thread block (forward) / per inner step (backward), and
// keys per inner step (forward) / per thread block (backward).
struct AttentionTiles {
  int64_t block_q = 64;
  int64_t block_k = 64;
};

// o: [N*heads*d], lse: [N*heads] (both overwritten). Scale 1/sqrt(head_dim). `threads` host threads take the
// thread blocks a (sequence, head) at a time, backward a (sequence, kv head): each item writes only its own
// outputs, in the order above, so the bits are the same at any count (model/cpu/parallel.h).
void attention_tiled_forward(const float* q, const float* k, const float* v, const AttentionShape& s,
                             std::span<const int32_t> cu_seqlens, std::span<const int32_t> hidden, float* o,
                             float* lse, const AttentionTiles& tiles = {}, int threads = 1);

// From forward's o and lse and the output gradient d_o: dq [N*heads*d], dk, dv [N*kv_heads*d] (all
// overwritten).
void attention_tiled_backward(const float* q, const float* k, const float* v, const float* o, const float* d_o,
                              const float* lse, const AttentionShape& s, std::span<const int32_t> cu_seqlens,
                              std::span<const int32_t> hidden, float* dq, float* dk, float* dv,
                              const AttentionTiles& tiles = {}, int threads = 1);

}  // namespace zero::model
