// The fp32-FMA attention kernels (attention_kernels.h, Path::Fma): forward, D = rowsum(dO * O), dK/dV,
// dQ. Each kernel is a transcription of a loop nest of model/attention_tiled.cpp: the emulation's
// per-block vectors are the shared-memory tiles here, its tile products are the loops marked "MMA" (fp32 FMA over shared memory,
// each output a fresh sum over the inner index in ascending order, then added to its running
// accumulator: the two-level sums of attention_tiled.h). Index arithmetic: attention_grid.h.
// Kernels only (launched by attention_kernels.cu); the file also compiles as host C++ under the SIMT
// emulator (tests/cuda/simt_emulator.h), so CI runs these very kernels without a GPU.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/math/bf16.h"
#include "core/math/online_softmax.h"
#include "core/math/softmax_backward.h"
#include "cuda/bf16_storage.cuh"
#include "cuda/dynamic_shared.cuh"
#include "model/cuda/attention_grid.h"
#include "model/cuda/attention_params.cuh"

namespace zero::model::cuda_attention::detail {
namespace {

using kernels::Bf16;
using kernels::from_f32;
using kernels::to_f32;

// The predicated tile load of the emulation's load_rows: `valid` rows of head `head` from token t0 on
// (token rows `row_stride` elements apart: Params' ld_*) into a row-major [rows, d] tile of row stride ld;
// rows past the sequence end are zero. (Speed: 16-byte vector loads, or cp.async / TMA, would go here.)
template <class T>
__device__ void load_tile(const T* __restrict__ x, int64_t row_stride, int64_t head, int d, int64_t t0, int valid,
                          int rows, int ld, float* __restrict__ tile) {
  for (int e = threadIdx.x; e < rows * d; e += kThreads) {
    const int i = e / d, c = e % d;
    tile[i * ld + c] = i < valid ? to_f32(x[(t0 + i) * row_stride + head * d + c]) : 0.0f;
  }
}

// One row of the accumulator tile per slot: element e = threadIdx.x + slot * kThreads of a row-major
// [64, d] tile (attention_grid.h). Returns false for slots past the tile.
__device__ __forceinline__ bool slot_element(int slot, int d, int& row, int& col) {
  const int e = threadIdx.x + slot * kThreads;
  row = e / d;
  col = e % d;
  return e < kBlockQ * d;
}

// ---------------------------------------------------------------------------------------------------
// Forward: attention_tiled_forward's body for one (sequence, query head, query block).
template <class T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, Params p,
                   T* __restrict__ o, float* __restrict__ lse) {
  float* smem = reinterpret_cast<float*>(kernels::dynamic_shared());
  const BlockCoord bc = row_block(blockIdx.x, p.num_seqs, p.heads, p.max_seqlen);
  const Sequence sq = sequence(p, bc.seq);
  const TileRows qr = tile_rows(bc.block, kBlockQ, sq.len);
  if (qr.count <= 0) return;  // past this sequence's end (the whole block leaves together)
  const int d = p.d, ld = kv_stride(d), nq = int(qr.count);
  const int64_t h = bc.head, g = h / p.r, q0 = qr.first;
  const SmemLayout L = forward_smem(d);
  float *qs = smem + L.q, *ks = smem + L.k, *vs = smem + L.v, *s = smem + L.s;
  float *row_m = smem + L.row_a, *row_l = smem + L.row_b, *row_alpha = smem + L.row_c;

  load_tile(q, p.ld_q, h, d, sq.start + q0, nq, kBlockQ, d, qs);
  if (threadIdx.x < kBlockQ) {
    row_m[threadIdx.x] = math::SoftmaxRow{}.m;
    row_l[threadIdx.x] = math::SoftmaxRow{}.l;
  }
  float acc[kAccSlots];
#pragma unroll
  for (int m = 0; m < kAccSlots; ++m) acc[m] = 0.0f;

  for (int64_t k0 = 0; k0 < key_end(qr); k0 += kBlockK) {
    const int nk = int(tile_rows(k0 / kBlockK, kBlockK, sq.len).count);
    __syncthreads();  // the previous tile's readers are done (first pass: Q and the rows are written)
    load_tile(k, p.ld_k, g, d, sq.start + k0, nk, kBlockK, ld, ks);
    load_tile(v, p.ld_v, g, d, sq.start + k0, nk, kBlockK, ld, vs);
    __syncthreads();

    // S = scale * Q K^T, masked where key > query or hidden. MMA: a [64, 64] x d product.
    for (int e = threadIdx.x; e < kBlockQ * kBlockK; e += kThreads) {
      const int i = e / kBlockK, j = e % kBlockK;
      if (i >= nq) continue;
      float dot = 0.0f;
      for (int c = 0; c < d; ++c) dot = fmaf(qs[i * d + c], ks[j * ld + c], dot);
      s[e] = masked(sq, q0 + i, k0 + j) ? -INFINITY : dot * p.scale;
    }
    __syncthreads();

    // Online softmax, one thread per row: the tile's exp-sum in ascending key order (the emulation's
    // tile_row), then added to the row's sum once.
    if (int(threadIdx.x) < nq) {
      const int i = threadIdx.x;
      float* si = s + i * kBlockK;
      float block_max = -INFINITY;
      for (int j = 0; j < kBlockK; ++j) block_max = fmaxf(block_max, si[j]);
      math::SoftmaxRow row{row_m[i], row_l[i]};
      row_alpha[i] = math::online_softmax_rescale(row, block_max);
      math::SoftmaxRow tile_row{row.m, 0.0f};
      for (int j = 0; j < kBlockK; ++j) si[j] = math::online_softmax_accept(tile_row, si[j]);
      row_m[i] = row.m;
      row_l[i] = row.l + tile_row.l;
    }
    __syncthreads();

    // acc = alpha * acc + P V. MMA: a [64, 64] x [64, d] product into a zeroed fragment, then the add.
#pragma unroll
    for (int m = 0; m < kAccSlots; ++m) {
      int i, c;
      if (!slot_element(m, d, i, c) || i >= nq) continue;
      float pv = 0.0f;
      for (int j = 0; j < kBlockK; ++j) pv = fmaf(s[i * kBlockK + j], vs[j * ld + c], pv);
      acc[m] = row_alpha[i] * acc[m] + pv;
    }
  }
  __syncthreads();  // the last row sums are visible to every thread

#pragma unroll
  for (int m = 0; m < kAccSlots; ++m) {
    int i, c;
    if (!slot_element(m, d, i, c) || i >= nq) continue;
    o[(sq.start + q0 + i) * p.ld_q + h * d + c] = from_f32<T>(acc[m] / row_l[i]);
  }
  if (int(threadIdx.x) < nq) {
    const int i = threadIdx.x;
    lse[(sq.start + q0 + i) * p.heads + h] = math::online_softmax_lse(math::SoftmaxRow{row_m[i], row_l[i]});
  }
}

// ---------------------------------------------------------------------------------------------------
// Backward pass 1: D = rowsum(dO * O), one thread per (token, head), columns ascending.
template <class T>
__global__ void __launch_bounds__(kThreads)
    row_dot_kernel(const T* __restrict__ o, const T* __restrict__ d_o, int64_t rows, int d, float* __restrict__ row_dot) {
  const int64_t th = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (th >= rows) return;
  float sum = 0.0f;
  for (int c = 0; c < d; ++c) sum = fmaf(to_f32(d_o[th * d + c]), to_f32(o[th * d + c]), sum);
  row_dot[th] = sum;
}

// The tiles both backward kernels recompute for one (query block, key block): P = exp(S - lse) (S
// masked as in forward; the same products in the same order, so P is forward's) and
// dS = scale * P * (dP - D) with dP = dO V^T. Rows past nq are not computed (and never read).
// Q, dO, K, V, lse and D are in shared memory. p_out may be null (the dQ kernel needs only dS).
__device__ void probs_and_dscores(const float* __restrict__ qs, const float* __restrict__ dos,
                                  const float* __restrict__ ks, const float* __restrict__ vs,
                                  const float* __restrict__ lse_s, const float* __restrict__ rowdot_s, int d, int nq,
                                  int64_t q0, int64_t k0, const Sequence& sq, float scale, float* __restrict__ p_out,
                                  float* __restrict__ ds_out) {
  const int ld = kv_stride(d);
  for (int e = threadIdx.x; e < kBlockQ * kBlockK; e += kThreads) {
    const int i = e / kBlockK, j = e % kBlockK;
    if (i >= nq) continue;
    // MMA: Q K^T and dO V^T, both [64, 64] x d.
    float dot = 0.0f, dp = 0.0f;
    for (int c = 0; c < d; ++c) dot = fmaf(qs[i * d + c], ks[j * ld + c], dot);
    for (int c = 0; c < d; ++c) dp = fmaf(dos[i * d + c], vs[j * ld + c], dp);
    const float score = masked(sq, q0 + i, k0 + j) ? -INFINITY : dot * scale;
    const float prob = math::softmax_prob_from_lse(score, lse_s[i]);
    if (p_out) p_out[e] = prob;
    ds_out[e] = scale * math::softmax_grad(prob, dp, rowdot_s[i]);
  }
}

// Loads a query block's Q and dO tiles and its rows' lse and D into shared memory.
template <class T>
__device__ void load_query_block(const T* __restrict__ q, const T* __restrict__ d_o, const float* __restrict__ lse,
                                 const float* __restrict__ row_dot, const Params& p, int64_t h, int64_t t0, int nq,
                                 float* qs, float* dos, float* lse_s, float* rowdot_s) {
  load_tile(q, p.ld_q, h, p.d, t0, nq, kBlockQ, p.d, qs);
  load_tile(d_o, p.ld_q, h, p.d, t0, nq, kBlockQ, p.d, dos);
  if (int(threadIdx.x) < nq) {
    lse_s[threadIdx.x] = lse[(t0 + threadIdx.x) * p.heads + h];
    rowdot_s[threadIdx.x] = row_dot[(t0 + threadIdx.x) * p.heads + h];
  }
}

// Backward pass 2a: dK, dV for one (sequence, kv head, key block), summed in registers over the r query
// heads ascending, then the query blocks ascending (attention_tiled_backward's loop nest), written once.
template <class T>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ d_o,
                const float* __restrict__ lse, const float* __restrict__ row_dot, Params p, T* __restrict__ dk,
                T* __restrict__ dv) {
  float* smem = reinterpret_cast<float*>(kernels::dynamic_shared());
  const BlockCoord bc = column_block(blockIdx.x, p.num_seqs, p.kv_heads);
  const Sequence sq = sequence(p, bc.seq);
  const TileRows kr = tile_rows(bc.block, kBlockK, sq.len);
  if (kr.count <= 0) return;
  const int d = p.d, ld = kv_stride(d), nk = int(kr.count);
  const int64_t g = bc.head, k0 = kr.first;
  const SmemLayout L = backward_smem(d);
  float *qs = smem + L.q, *dos = smem + L.d_o, *ks = smem + L.k, *vs = smem + L.v;
  float *ps = smem + L.s, *dss = smem + L.ds, *lse_s = smem + L.row_a, *rowdot_s = smem + L.row_b;

  load_tile(k, p.ld_k, g, d, sq.start + k0, nk, kBlockK, ld, ks);
  load_tile(v, p.ld_v, g, d, sq.start + k0, nk, kBlockK, ld, vs);
  float dk_acc[kAccSlots], dv_acc[kAccSlots];
#pragma unroll
  for (int m = 0; m < kAccSlots; ++m) dk_acc[m] = dv_acc[m] = 0.0f;

  for (int64_t h = g * p.r; h < (g + 1) * p.r; ++h) {
    for (int64_t q0 = first_query_start(k0); q0 < sq.len; q0 += kBlockQ) {
      const int nq = int(tile_rows(q0 / kBlockQ, kBlockQ, sq.len).count);
      __syncthreads();  // the previous query block's readers are done (first pass: K, V are written)
      load_query_block(q, d_o, lse, row_dot, p, h, sq.start + q0, nq, qs, dos, lse_s, rowdot_s);
      __syncthreads();
      probs_and_dscores(qs, dos, ks, vs, lse_s, rowdot_s, d, nq, q0, k0, sq, p.scale, ps, dss);
      __syncthreads();
      // dV += P^T dO and dK += dS^T Q (each a fresh partial over the block's query rows ascending, then
      // added). MMA: two [64, 64]^T x [64, d] products.
#pragma unroll
      for (int m = 0; m < kAccSlots; ++m) {
        int j, c;
        if (!slot_element(m, d, j, c)) continue;
        float dv_part = 0.0f, dk_part = 0.0f;
        for (int i = 0; i < nq; ++i) {
          dv_part = fmaf(ps[i * kBlockK + j], dos[i * d + c], dv_part);
          dk_part = fmaf(dss[i * kBlockK + j], qs[i * d + c], dk_part);
        }
        dv_acc[m] += dv_part;
        dk_acc[m] += dk_part;
      }
    }
  }

#pragma unroll
  for (int m = 0; m < kAccSlots; ++m) {
    int j, c;
    if (!slot_element(m, d, j, c) || j >= nk) continue;
    const int64_t t = sq.start + k0 + j;
    dk[t * p.ld_k + g * d + c] = from_f32<T>(dk_acc[m]);
    dv[t * p.ld_dv + g * d + c] = from_f32<T>(dv_acc[m]);
  }
}

// Backward pass 2b: dQ for one (sequence, query head, query block): key blocks ascending, each adding
// its dS K partial to the register accumulator: the emulation's dQ sums in its order (the ordered
// counter's order), with no wait between thread blocks.
template <class T>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ d_o,
              const float* __restrict__ lse, const float* __restrict__ row_dot, Params p, T* __restrict__ dq) {
  float* smem = reinterpret_cast<float*>(kernels::dynamic_shared());
  const BlockCoord bc = row_block(blockIdx.x, p.num_seqs, p.heads, p.max_seqlen);
  const Sequence sq = sequence(p, bc.seq);
  const TileRows qr = tile_rows(bc.block, kBlockQ, sq.len);
  if (qr.count <= 0) return;
  const int d = p.d, ld = kv_stride(d), nq = int(qr.count);
  const int64_t h = bc.head, g = h / p.r, q0 = qr.first;
  const SmemLayout L = backward_smem(d);
  float *qs = smem + L.q, *dos = smem + L.d_o, *ks = smem + L.k, *vs = smem + L.v;
  float *dss = smem + L.ds, *lse_s = smem + L.row_a, *rowdot_s = smem + L.row_b;

  load_query_block(q, d_o, lse, row_dot, p, h, sq.start + q0, nq, qs, dos, lse_s, rowdot_s);
  float acc[kAccSlots];
#pragma unroll
  for (int m = 0; m < kAccSlots; ++m) acc[m] = 0.0f;

  for (int64_t k0 = 0; k0 < key_end(qr); k0 += kBlockK) {
    const int nk = int(tile_rows(k0 / kBlockK, kBlockK, sq.len).count);
    __syncthreads();
    load_tile(k, p.ld_k, g, d, sq.start + k0, nk, kBlockK, ld, ks);
    load_tile(v, p.ld_v, g, d, sq.start + k0, nk, kBlockK, ld, vs);
    __syncthreads();
    probs_and_dscores(qs, dos, ks, vs, lse_s, rowdot_s, d, nq, q0, k0, sq, p.scale, nullptr, dss);
    __syncthreads();
    // dQ += dS K. MMA: a [64, 64] x [64, d] product.
#pragma unroll
    for (int m = 0; m < kAccSlots; ++m) {
      int i, c;
      if (!slot_element(m, d, i, c) || i >= nq) continue;
      float part = 0.0f;
      for (int j = 0; j < kBlockK; ++j) part = fmaf(dss[i * kBlockK + j], ks[j * ld + c], part);
      acc[m] += part;
    }
  }

#pragma unroll
  for (int m = 0; m < kAccSlots; ++m) {
    int i, c;
    if (!slot_element(m, d, i, c) || i >= nq) continue;
    dq[(sq.start + q0 + i) * p.ld_q + h * d + c] = from_f32<T>(acc[m]);
  }
}

}  // namespace
}  // namespace zero::model::cuda_attention::detail
