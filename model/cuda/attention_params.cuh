// What both attention kernel files (attention_fma_kernels.cuh: the fp32-FMA path;
// attention_mma_kernels.cuh: the tensor-core path) need to find a block's rows: the kernel parameters and the checked sequence lookup.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "core/math/attention_mask.h"
#include "model/cuda/attention_launch.h"

namespace zero::model::cuda_attention::detail {

// What every kernel needs to find its rows (by value: kernel parameters).
struct Params {
  const int32_t* cu_seqlens;
  const int32_t* hidden;  // 2 per sequence (core/math/attention_mask.h), or null
  int64_t num_seqs, max_seqlen, num_tokens;
  int64_t heads, kv_heads, r;  // r = heads / kv_heads
  int d;
  // Elements from one token's row to the next: q, o, d_o, dq (heads * d); k, dk (kv_heads * d); v and dv
  // (kv_heads * d, or wider when they are column views of the fused q/k/v projection and its gradient).
  int64_t ld_q, ld_k, ld_v, ld_dv;
  float scale;       // 1 / sqrt(d), as the emulation computes it
  float scale_log2;  // scale * log2(e): the tensor-core kernels' scores live in the exp2 domain
};

inline Params params_of(const Geometry& g) {
  const float scale = 1.0f / sqrtf(float(g.head_dim));
  const int64_t ld_k = g.kv_heads * g.head_dim;
  return {g.cu_seqlens, g.hidden, g.num_seqs, g.max_seqlen, g.num_tokens, g.heads, g.kv_heads, g.heads / g.kv_heads,
          int(g.head_dim), g.heads * g.head_dim, ld_k, g.v_stride ? g.v_stride : ld_k, g.dv_stride ? g.dv_stride : ld_k, scale,
          scale * 1.4426950408889634f};
}

// Sequence `seq`'s token range and hidden span, checked against the host's promise (attention_kernels.h):
// a length over max_seqlen would silently leave query blocks unlaunched, and a hidden span from key 0 would
// leave a row with no key, so either stops the kernel with a message instead.
struct Sequence {
  int64_t start, len;
  int64_t hidden_begin, hidden_end;  // 0, 0: none
};
__device__ inline Sequence sequence(const Params& p, int64_t seq) {
  const int64_t start = p.cu_seqlens[seq], end = p.cu_seqlens[seq + 1];
  if (start < 0 || end < start || end - start > p.max_seqlen || end > p.num_tokens) {
    if (threadIdx.x == 0)
      printf("zero attention kernels: bad cu_seqlens: sequence %lld spans [%lld, %lld), max_seqlen %lld, "
             "num_tokens %lld\n",
             (long long)seq, (long long)start, (long long)end, (long long)p.max_seqlen, (long long)p.num_tokens);
    __trap();
  }
  const int64_t hb = p.hidden ? p.hidden[2 * seq] : 0, he = p.hidden ? p.hidden[2 * seq + 1] : 0;
  if (he < hb || (he > hb && (hb < 1 || he > end - start))) {
    if (threadIdx.x == 0)
      printf("zero attention kernels: bad hidden span [%lld, %lld) of sequence %lld (length %lld)\n", (long long)hb,
             (long long)he, (long long)seq, (long long)(end - start));
    __trap();
  }
  return {start, end - start, hb, he};
}

// The mask within sequence sq (core/math/attention_mask.h; positions within the sequence).
__device__ inline bool masked(const Sequence& sq, int64_t query_pos, int64_t key_pos) {
  return math::attention_masked(query_pos, key_pos, sq.hidden_begin, sq.hidden_end);
}

// Whether the mask hides anything in the box of queries [q, q + nq) x keys [k, k + nk) of sq; when not, a kernel
// skips the per-element mask for the box (the same bits: masked() is false for each element of it).
__device__ inline bool box_masked(const Sequence& sq, int64_t q, int nq, int64_t k, int nk) {
  return math::attention_box_masked(q, q + nq - 1, k, k + nk - 1, sq.hidden_begin, sq.hidden_end);
}

}  // namespace zero::model::cuda_attention::detail
