// The reward model's CUDA kernels (see model_kernels.h): a warp or a block per row for the norms (the row in
// registers), a block per pooled row for the head, grid-stride loops for element-wise work, fixed-order sums
// (a warp's butterfly, then warps in order), and column sums of per-block partials for the weight gradients.
// Per-element math from core/math, as on the CPU. Launches through cuda/kernel_launch.cuh, so the whole file
// also runs on the host under the SIMT emulator (tests/cuda/model_kernels_emulated_test.cpp).
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/math/activations.h"
#include "core/math/bf16.h"
#include "core/math/rmsnorm_row.h"
#include "core/math/rope_math.h"
#include "cuda/check.h"
#include "cuda/dynamic_shared.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"
#include "model/cuda/model_kernels.h"
#include "model/device_scratch.h"

namespace zero::model::cuda_kernels {
namespace {

using math::add_rn;
using math::fma_rn;
using math::mul_rn;

constexpr int kMaxBlocks = 4096;       // element-wise grids (grid-stride beyond)
constexpr int kMaxRowBlocks = 65535;   // one block per row up to this, grid-stride beyond

// A tensor element as fp32, whatever its type; stores round fp32 -> bf16 to nearest even.
__device__ __forceinline__ float ld(const void* p, Elem t, int64_t i) {
  return t == Elem::F32 ? static_cast<const float*>(p)[i] : math::bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}
__device__ __forceinline__ void st(void* p, Elem t, int64_t i, float v) {
  if (t == Elem::F32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<uint16_t*>(p)[i] = math::f32_to_bf16(v);
}

int grid_for(int64_t n) { return int(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks))); }
int row_grid(int64_t rows) { return int(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxRowBlocks))); }

void check_launch() { CUDA_CHECK(kernels::last_launch_error()); }

// ---- norms ------------------------------------------------------------------------------------------
// A row is held by a group of G threads: a warp (G = 32) for head-sized rows (q/k-norm: tokens x heads rows
// of 128), the whole block (G = kThreads) for hidden-sized rows. Thread t of a group holds elements t, t + G,
// ..., t + (K - 1) G of its row in registers (those below dim), so each load of the group is contiguous and the
// row is read once. One block per row with a shared-memory tree (8 barriers a sum) and 256 blocks for the
// backward ran head-sized rows one after another: the q/k-norm backward was latency, not bandwidth.
using device_scratch::kMaxNormBackwardBlocks;  // backward grids (each block one fp32 partial of dw)
using device_scratch::norm_blocks;             // the grids and their partials: model/device_scratch.h
using device_scratch::norm_rows_per_block;     // rows a block holds: 8 warps' of up to 256, else one
static_assert(kThreads == device_scratch::kNormBlockThreads, "the planner sizes the norm grids for these blocks");

template <int G>
__device__ __forceinline__ void group_barrier() {
  if constexpr (G == 32) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

// The sum over a group of one value per thread; every thread of the group gets the same bits. The warp's
// butterfly first (each pair of lanes adds the same two partials, so they stay equal), then for a block the
// warps' sums in warp order through `red` (kThreads / 32 floats of shared memory).
template <int G>
__device__ float group_sum(float* red, float x) {
  for (int m = 16; m > 0; m /= 2) x = add_rn(x, __shfl_xor_sync(0xffffffffu, x, m));
  if constexpr (G == 32) {
    return x;
  } else {
    __syncthreads();  // the previous sum's readers are done with red
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
    __syncthreads();
    float s = red[0];
    for (int w = 1; w < G / 32; ++w) s = add_rn(s, red[w]);
    return s;
  }
}

// What the norm kernels share: the rows and where each lives. Row r is head r % heads of token r / heads
// (heads 1 without RoPE); x and dx rows of a token start x_ld / dx_ld elements apart, y and dy are packed.
struct NormRows {
  int64_t rows, dim, heads, x_ld, dx_ld;
  __device__ int64_t x_at(int64_t r) const { return (r / heads) * x_ld + (r % heads) * dim; }
  __device__ int64_t dx_at(int64_t r) const { return (r / heads) * dx_ld + (r % heads) * dim; }
};

// RoPE over a row held as above, in place: v[k] is element lane + k G. In registers when the row fills them
// exactly (dim == G K, K even: element i's partner i + dim / 2 is the same thread's k + K / 2; Qwen3's
// head_dim 128 in a warp), otherwise through `row` (dim floats of the group's shared memory: each pair is
// read and rewritten by one thread, then every thread takes its own elements back). `rotate(a, b, i)`: the
// pair of elements i < dim / 2 and i + dim / 2 rotated.
template <int G, int K, class Rotate>
__device__ void rope_row(float (&v)[K], int lane, int64_t dim, float* row, Rotate rotate) {
  const int64_t half = dim / 2;
  if (K % 2 == 0 && dim == int64_t(G) * K) {
    for (int k = 0; k < K / 2; ++k) {
      const math::RopePair p = rotate(v[k], v[k + K / 2], lane + int64_t(k) * G);
      v[k] = p.a;
      v[k + K / 2] = p.b;
    }
    return;
  }
  for (int k = 0; k < K; ++k)
    if (const int64_t i = lane + int64_t(k) * G; i < dim) row[i] = v[k];
  group_barrier<G>();
  for (int64_t i = lane; i < half; i += G) {
    const math::RopePair p = rotate(row[i], row[i + half], i);
    row[i] = p.a;
    row[i + half] = p.b;
  }
  group_barrier<G>();
  for (int k = 0; k < K; ++k)
    if (const int64_t i = lane + int64_t(k) * G; i < dim) v[k] = row[i];
  group_barrier<G>();  // the row buffer is rewritten by the group's next row
}

// Shared memory: kThreads / G rows of dim floats when RoPE goes through shared memory.
template <int G, int K>
__global__ void norm_forward_kernel(NormRows n, const void* x, Elem xt, const void* w, Elem wt, float eps, void* y,
                                    Elem yt, float* rstd, const float* cosv, const float* sinv) {
  constexpr int kGroups = kThreads / G;
  __shared__ float red[kThreads / 32];
  const int lane = int(threadIdx.x) % G, group = int(threadIdx.x) / G;
  float* row = reinterpret_cast<float*>(kernels::dynamic_shared()) + group * n.dim;
  float wv[K];
  for (int k = 0; k < K; ++k) {
    const int64_t i = lane + int64_t(k) * G;
    wv[k] = i < n.dim ? ld(w, wt, i) : 0.0f;
  }
  // Every thread of a group runs the same rows (a block-wide group: every thread of the block).
  for (int64_t r = int64_t(blockIdx.x) * kGroups + group; r < n.rows; r += int64_t(gridDim.x) * kGroups) {
    const int64_t xbase = n.x_at(r), ybase = r * n.dim;
    float v[K];
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
      const int64_t i = lane + int64_t(k) * G;
      v[k] = i < n.dim ? ld(x, xt, xbase + i) : 0.0f;
      acc = fma_rn(v[k], v[k], acc);
    }
    const float rs = math::rmsnorm_rstd(group_sum<G>(red, acc), n.dim, eps);
    if (lane == 0) rstd[r] = rs;
    for (int k = 0; k < K; ++k)
      if (const int64_t i = lane + int64_t(k) * G; i < n.dim) v[k] = math::rmsnorm_y(v[k], wv[k], rs);
    if (cosv != nullptr) {
      const int64_t angles = (r / n.heads) * (n.dim / 2);
      rope_row<G, K>(v, lane, n.dim, row, [&](float a, float b, int64_t i) {
        return math::rope_rotate({a, b}, cosv[angles + i], sinv[angles + i]);
      });
    }
    for (int k = 0; k < K; ++k)
      if (const int64_t i = lane + int64_t(k) * G; i < n.dim) st(y, yt, ybase + i, v[k]);
  }
}

// Group g of block b takes rows b kGroups + g, then gridDim.x kGroups further on, ...; it keeps its part of
// dw in registers, and the block writes partials[b, :]: its groups' parts added in group order.
// Shared memory: kThreads / G rows of dim floats (RoPE through shared memory, then the groups' parts).
template <int G, int K>
__global__ void norm_backward_kernel(NormRows n, const void* x, Elem xt, const void* w, Elem wt, const float* rstd,
                                     const void* dy, Elem dyt, void* dx, Elem dxt, float* partials, const float* cosv,
                                     const float* sinv, const void* res, Elem rt) {
  constexpr int kGroups = kThreads / G;
  __shared__ float red[kThreads / 32];
  const int lane = int(threadIdx.x) % G, group = int(threadIdx.x) / G;
  float* shared_rows = reinterpret_cast<float*>(kernels::dynamic_shared());
  float* row = shared_rows + group * n.dim;
  float wv[K], dw[K];
  for (int k = 0; k < K; ++k) {
    const int64_t i = lane + int64_t(k) * G;
    wv[k] = i < n.dim ? ld(w, wt, i) : 0.0f;
    dw[k] = 0.0f;
  }
  for (int64_t r = int64_t(blockIdx.x) * kGroups + group; r < n.rows; r += int64_t(gridDim.x) * kGroups) {
    const int64_t xbase = n.x_at(r), dybase = r * n.dim, dxbase = n.dx_at(r);
    float xv[K], dn[K];  // dn: dy, rotated back with RoPE
    for (int k = 0; k < K; ++k) {
      const int64_t i = lane + int64_t(k) * G;
      xv[k] = i < n.dim ? ld(x, xt, xbase + i) : 0.0f;
      dn[k] = i < n.dim ? ld(dy, dyt, dybase + i) : 0.0f;
    }
    if (cosv != nullptr) {
      const int64_t angles = (r / n.heads) * (n.dim / 2);
      rope_row<G, K>(dn, lane, n.dim, row, [&](float a, float b, int64_t i) {
        return math::rope_rotate_transpose({a, b}, cosv[angles + i], sinv[angles + i]);
      });
    }
    const float rs = rstd[r];
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
      const float xhat = mul_rn(xv[k], rs);
      acc = fma_rn(xhat, mul_rn(dn[k], wv[k]), acc);
      dw[k] = fma_rn(dn[k], xhat, dw[k]);
    }
    const float mean = math::div_rn(group_sum<G>(red, acc), float(n.dim));
    for (int k = 0; k < K; ++k)
      if (const int64_t i = lane + int64_t(k) * G; i < n.dim) {
        const float d = math::rmsnorm_dx(mul_rn(xv[k], rs), mul_rn(dn[k], wv[k]), mean, rs);
        st(dx, dxt, dxbase + i, res ? add_rn(d, ld(res, rt, dxbase + i)) : d);
      }
  }
  float* part = partials + int64_t(blockIdx.x) * n.dim;
  if constexpr (kGroups == 1) {
    for (int k = 0; k < K; ++k)
      if (const int64_t i = lane + int64_t(k) * G; i < n.dim) part[i] = dw[k];
  } else {
    __syncthreads();  // every group is past its rows (and their RoPE buffers)
    for (int k = 0; k < K; ++k)
      if (const int64_t i = lane + int64_t(k) * G; i < n.dim) row[i] = dw[k];
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n.dim; i += kThreads) {
      float s = shared_rows[i];
      for (int g = 1; g < kGroups; ++g) s = add_rn(s, shared_rows[g * n.dim + i]);
      part[i] = s;
    }
  }
}

// out[c] = the sum over b < blocks of partials[b, c]: each of 8 slices of a block adds the rows b = slice,
// slice + 8, ... in order, then the slices are added in order (a fixed order, 32 columns a block).
constexpr int kColumnSlices = kThreads / 32;
__global__ void column_sum_kernel(const float* partials, int64_t blocks, int64_t dim, void* out, Elem ot) {
  __shared__ float slice_sum[kColumnSlices][32];
  const int col = int(threadIdx.x) % 32, slice = int(threadIdx.x) / 32;
  for (int64_t c0 = int64_t(blockIdx.x) * 32; c0 < dim; c0 += int64_t(gridDim.x) * 32) {
    const int64_t c = c0 + col;
    float acc = 0.0f;
    if (c < dim)
      for (int64_t b = slice; b < blocks; b += kColumnSlices) acc = add_rn(acc, partials[b * dim + c]);
    slice_sum[slice][col] = acc;
    __syncthreads();
    if (slice == 0 && c < dim) {
      float s = slice_sum[0][col];
      for (int j = 1; j < kColumnSlices; ++j) s = add_rn(s, slice_sum[j][col]);
      st(out, ot, c, s);
    }
    __syncthreads();  // slice_sum is rewritten by the next columns
  }
}

void column_sum(const float* partials, int64_t blocks, int64_t dim, void* out, Elem ot, cudaStream_t s) {
  ZERO_LAUNCH(column_sum_kernel, std::max<int64_t>(1, std::min<int64_t>((dim + 31) / 32, kMaxBlocks)), kThreads, 0, s,
      partials, blocks, dim, out, ot);
  check_launch();
}

// ---- element-wise -----------------------------------------------------------------------------------
// Element-wise kernels over tensors of one type T (uint16_t: bf16 bits, or float), V elements a thread: V = 1,
// or 16 bytes' worth (one Pack, cuda/vector_pack.cuh) where sizes, strides and alignment allow (packed_width).
// The per-element formulas are the same at every width: the same bits.
using kernels::load_pack;
using kernels::Pack;
using kernels::store_pack;
__device__ __forceinline__ float as_f32(float x) { return x; }
__device__ __forceinline__ float as_f32(uint16_t b) { return math::bf16_to_f32(b); }
template <typename T>
__device__ __forceinline__ T from_f32(float x) {
  if constexpr (sizeof(T) == 2) {
    return math::f32_to_bf16(x);
  } else {
    return x;
  }
}

// SwiGLU: a block per row (grid-stride over rows), its threads across the row: g, u, dg and du may be column
// views of wider rows (SwigluRows), m and dm are packed.
template <typename T, int V>
__global__ void swiglu_forward_packed_kernel(SwigluRows r, const void* g, const void* u, void* m) {
  for (int64_t row = blockIdx.x; row < r.rows; row += gridDim.x)
    for (int64_t c = threadIdx.x * int64_t(V); c < r.cols; c += int64_t(blockDim.x) * V) {
      const Pack<T, V> gp = load_pack<T, V>(g, row * r.ld_g + c), up = load_pack<T, V>(u, row * r.ld_u + c);
      Pack<T, V> mp;
      for (int k = 0; k < V; ++k) mp.v[k] = from_f32<T>(mul_rn(math::silu(as_f32(gp.v[k])), as_f32(up.v[k])));
      store_pack<T, V>(m, row * r.cols + c, mp);
    }
}
template <typename T, int V>
__global__ void swiglu_backward_packed_kernel(SwigluRows r, const void* g, const void* u, const void* dm, void* dg,
                                              void* du) {
  for (int64_t row = blockIdx.x; row < r.rows; row += gridDim.x)
    for (int64_t c = threadIdx.x * int64_t(V); c < r.cols; c += int64_t(blockDim.x) * V) {
      const Pack<T, V> gp = load_pack<T, V>(g, row * r.ld_g + c), up = load_pack<T, V>(u, row * r.ld_u + c),
                       dmp = load_pack<T, V>(dm, row * r.cols + c);
      Pack<T, V> dgp, dup;
      for (int k = 0; k < V; ++k) {
        const float gi = as_f32(gp.v[k]), dmi = as_f32(dmp.v[k]);
        dup.v[k] = from_f32<T>(mul_rn(dmi, math::silu(gi)));
        dgp.v[k] = from_f32<T>(mul_rn(mul_rn(dmi, as_f32(up.v[k])), math::silu_grad(gi)));
      }
      store_pack<T, V>(du, row * r.ld_du + c, dup);
      store_pack<T, V>(dg, row * r.ld_dg + c, dgp);
    }
}
// out = a + b (the residual stream's adds are fp32 at token x hidden: pure memory traffic).
template <typename T, int V>
__global__ void add_packed_kernel(const void* a, const void* b, void* out, int64_t n) {
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * V; i < n; i += int64_t(gridDim.x) * blockDim.x * V) {
    const Pack<T, V> ap = load_pack<T, V>(a, i), bp = load_pack<T, V>(b, i);
    Pack<T, V> op;
    for (int k = 0; k < V; ++k) op.v[k] = from_f32<T>(add_rn(as_f32(ap.v[k]), as_f32(bp.v[k])));
    store_pack<T, V>(out, i, op);
  }
}

// The launches of the kernels above for T and V (each instantiation one token for ZERO_LAUNCH).
template <typename T, int V>
void launch_swiglu_forward(const SwigluRows& r, const void* g, const void* u, void* m, cudaStream_t s) {
  constexpr auto kernel = swiglu_forward_packed_kernel<T, V>;
  ZERO_LAUNCH(kernel, row_grid(r.rows), kThreads, 0, s, r, g, u, m);
}
template <typename T, int V>
void launch_swiglu_backward(const SwigluRows& r, const void* g, const void* u, const void* dm, void* dg, void* du,
                            cudaStream_t s) {
  constexpr auto kernel = swiglu_backward_packed_kernel<T, V>;
  ZERO_LAUNCH(kernel, row_grid(r.rows), kThreads, 0, s, r, g, u, dm, dg, du);
}
template <typename T, int V>
void launch_add(const void* a, const void* b, void* out, int64_t n, cudaStream_t s) {
  constexpr auto kernel = add_packed_kernel<T, V>;
  ZERO_LAUNCH(kernel, grid_for(n / V), kThreads, 0, s, a, b, out, n);
}

// ---- embedding --------------------------------------------------------------------------------------
__global__ void embedding_forward_kernel(const void* run, Elem rt, int64_t run_begin, int64_t run_end,
                                         const int32_t* tokens, int64_t num_tokens, int64_t hidden, void* x, Elem xt) {
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const int64_t row = int64_t(tokens[t]) * hidden;
    const int64_t a = max(run_begin, row), b = min(run_end, row + hidden);
    for (int64_t j = a + threadIdx.x; j < b; j += kThreads) st(x, xt, t * hidden + (j - row), ld(run, rt, j - run_begin));
  }
}
__global__ void embedding_backward_kernel(const void* dx, Elem dxt, int64_t hidden, const int32_t* by_id,
                                          const int32_t* ids, const int32_t* id_start, int64_t num_ids, void* run,
                                          Elem rt, int64_t run_begin, int64_t run_end) {
  for (int64_t u = blockIdx.x; u < num_ids; u += gridDim.x) {
    const int64_t row = int64_t(ids[u]) * hidden;
    const int64_t a = max(run_begin, row), b = min(run_end, row + hidden);
    for (int64_t j = a + threadIdx.x; j < b; j += kThreads) {
      float acc = 0.0f;
      for (int32_t k = id_start[u]; k < id_start[u + 1]; ++k) acc = add_rn(acc, ld(dx, dxt, int64_t(by_id[k]) * hidden + (j - row)));
      st(run, rt, j - run_begin, acc);
    }
  }
}

// ---- the score head ---------------------------------------------------------------------------------
// The pooled row's rstd (a block-wide group: the block's threads across the row).
__device__ float pooled_rstd(float* red, const void* x, Elem xt, int64_t base, int64_t hidden, float eps) {
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = ld(x, xt, base + i);
    acc = fma_rn(v, v, acc);
  }
  return math::rmsnorm_rstd(group_sum<kThreads>(red, acc), hidden, eps);
}

__global__ void pooled_head_forward_kernel(const void* x, Elem xt, int64_t hidden, const int32_t* pooled, int64_t seqs,
                                           const void* norm_w, Elem nt, const void* score, Elem stype, float eps,
                                           float* rewards) {
  __shared__ float red[kThreads / 32];
  for (int64_t q = blockIdx.x; q < seqs; q += gridDim.x) {
    const int64_t base = int64_t(pooled[q]) * hidden;
    const float rs = pooled_rstd(red, x, xt, base, hidden, eps);
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x)
      acc = fma_rn(ld(score, stype, i), math::rmsnorm_y(ld(x, xt, base + i), ld(norm_w, nt, i), rs), acc);
    const float r = group_sum<kThreads>(red, acc);
    if (threadIdx.x == 0) rewards[q] = r;
  }
}

// partials: [seqs, hidden] of d_score terms, then [seqs, hidden] of d_norm terms.
__global__ void pooled_head_backward_kernel(const void* x, Elem xt, int64_t hidden, const int32_t* pooled,
                                            int64_t seqs, const void* norm_w, Elem nt, const void* score, Elem stype,
                                            float eps, const float* drewards, void* dx, Elem dxt, float* partials) {
  __shared__ float red[kThreads / 32];
  float* p_score = partials;
  float* p_norm = partials + seqs * hidden;
  for (int64_t q = blockIdx.x; q < seqs; q += gridDim.x) {
    const int64_t base = int64_t(pooled[q]) * hidden;
    const float rs = pooled_rstd(red, x, xt, base, hidden, eps), dr = drewards[q];
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float xi = ld(x, xt, base + i), wi = ld(norm_w, nt, i), xhat = mul_rn(xi, rs);
      const float dxn = mul_rn(ld(score, stype, i), dr);
      p_score[q * hidden + i] = mul_rn(math::rmsnorm_y(xi, wi, rs), dr);
      p_norm[q * hidden + i] = mul_rn(dxn, xhat);
      acc = fma_rn(xhat, mul_rn(dxn, wi), acc);
    }
    const float mean = math::div_rn(group_sum<kThreads>(red, acc), float(hidden));
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float xhat = mul_rn(ld(x, xt, base + i), rs);
      const float dxhat = mul_rn(mul_rn(ld(score, stype, i), dr), ld(norm_w, nt, i));
      st(dx, dxt, base + i, math::rmsnorm_dx(xhat, dxhat, mean, rs));
    }
  }
}

// ---- the pair loss ----------------------------------------------------------------------------------
__global__ void pair_loss_kernel(const float* rewards, const uint8_t* mask, const float* margin, int64_t pairs,
                                 double center, float* drewards, PairLossSums* out, const int32_t* group,
                                 int32_t groups) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  out[0] = math::pair_losses(rewards, mask, margin, pairs, center, drewards, group, out + 1, groups);
}

}  // namespace

namespace {
// Calls f(std::integral_constant<int, G>, std::integral_constant<int, K>) with the group (a warp up to 256
// elements, else the block) and the elements a thread for rows of `dim` elements (dim <= kMaxNormDim).
template <class F>
void with_norm_group(int64_t dim, F&& f) {
  using std::integral_constant;
  if (dim <= 32) f(integral_constant<int, 32>{}, integral_constant<int, 1>{});
  else if (dim <= 64) f(integral_constant<int, 32>{}, integral_constant<int, 2>{});
  else if (dim <= 128) f(integral_constant<int, 32>{}, integral_constant<int, 4>{});
  else if (dim <= 256) f(integral_constant<int, 32>{}, integral_constant<int, 8>{});
  else if (dim <= 2 * kThreads) f(integral_constant<int, kThreads>{}, integral_constant<int, 2>{});
  else if (dim <= 4 * kThreads) f(integral_constant<int, kThreads>{}, integral_constant<int, 4>{});
  else if (dim <= 8 * kThreads) f(integral_constant<int, kThreads>{}, integral_constant<int, 8>{});
  else if (dim <= 16 * kThreads) f(integral_constant<int, kThreads>{}, integral_constant<int, 16>{});
  else if (dim <= 32 * kThreads) f(integral_constant<int, kThreads>{}, integral_constant<int, 32>{});
  else f(integral_constant<int, kThreads>{}, integral_constant<int, 48>{});
}
}  // namespace

int norm_partial_blocks(int64_t rows, int64_t dim) { return int(device_scratch::norm_partial_blocks(rows, dim)); }

void norm_forward(const void* x, Elem xt, const void* w, Elem wt, int64_t rows, int64_t dim, float eps, void* y,
                  Elem yt, float* rstd, const float* cos, const float* sin, int64_t heads, cudaStream_t s, int64_t x_ld) {
  if (rows == 0) return;
  const int64_t row_heads = cos ? heads : 1;  // without RoPE every row is a token's
  const NormRows n{rows, dim, row_heads, x_ld ? x_ld : row_heads * dim, 0};
  const size_t shmem = cos ? sizeof(float) * size_t(norm_rows_per_block(dim) * dim) : 0;
  with_norm_group(dim, [&](auto g, auto k) {
    constexpr auto kernel = norm_forward_kernel<decltype(g)::value, decltype(k)::value>;
    ZERO_LAUNCH(kernel, norm_blocks(rows, dim, kMaxRowBlocks), kThreads, shmem, s, n, x, xt, w, wt, eps, y, yt, rstd,
        cos, sin);
  });
  check_launch();
}

void norm_backward(const void* x, Elem xt, const void* w, Elem wt, const float* rstd, const void* dy, Elem dyt,
                   int64_t rows, int64_t dim, void* dx, Elem dxt, float* partials, void* dw, Elem dwt,
                   const float* cos, const float* sin, int64_t heads, cudaStream_t s, int64_t x_ld, int64_t dx_ld,
                   const void* residual, Elem residual_t) {
  const int blocks = norm_partial_blocks(rows, dim);
  const int64_t row_heads = cos ? heads : 1;
  const NormRows n{rows, dim, row_heads, x_ld ? x_ld : row_heads * dim, dx_ld ? dx_ld : row_heads * dim};
  const int64_t groups = norm_rows_per_block(dim);
  const size_t shmem = cos || groups > 1 ? sizeof(float) * size_t(groups * dim) : 0;
  with_norm_group(dim, [&](auto g, auto k) {
    constexpr auto kernel = norm_backward_kernel<decltype(g)::value, decltype(k)::value>;
    ZERO_LAUNCH(kernel, blocks, kThreads, shmem, s, n, x, xt, w, wt, rstd, dy, dyt, dx, dxt, partials, cos, sin,
        residual, residual_t);
  });
  check_launch();
  column_sum(partials, blocks, dim, dw, dwt, s);
}

int packed_width(Elem t, int64_t n, std::initializer_list<const void*> tensors) {
  const int v = t == Elem::F32 ? 4 : 8;  // 16 bytes
  if (n % v != 0) return 1;
  for (const void* p : tensors)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 1;
  return v;
}

int swiglu_vector_width(const SwigluRows& r, Elem t, std::initializer_list<const void*> tensors) {
  const int v = packed_width(t, 0, tensors);
  for (int64_t n : {r.cols, r.ld_g, r.ld_u, r.ld_dg, r.ld_du})
    if (n % v != 0) return 1;
  return v;
}

void swiglu_forward(const SwigluRows& r, const void* g, const void* u, void* m, Elem t, cudaStream_t s) {
  if (r.rows == 0 || r.cols == 0) return;
  const bool packed = swiglu_vector_width(r, t, {g, u, m}) > 1;
  if (t == Elem::F32) {
    packed ? launch_swiglu_forward<float, 4>(r, g, u, m, s) : launch_swiglu_forward<float, 1>(r, g, u, m, s);
  } else {
    packed ? launch_swiglu_forward<uint16_t, 8>(r, g, u, m, s) : launch_swiglu_forward<uint16_t, 1>(r, g, u, m, s);
  }
  check_launch();
}
void swiglu_backward(const SwigluRows& r, const void* g, const void* u, const void* dm, void* dg, void* du, Elem t,
                     cudaStream_t s) {
  if (r.rows == 0 || r.cols == 0) return;
  const bool packed = swiglu_vector_width(r, t, {g, u, dm, dg, du}) > 1;
  if (t == Elem::F32) {
    packed ? launch_swiglu_backward<float, 4>(r, g, u, dm, dg, du, s)
           : launch_swiglu_backward<float, 1>(r, g, u, dm, dg, du, s);
  } else {
    packed ? launch_swiglu_backward<uint16_t, 8>(r, g, u, dm, dg, du, s)
           : launch_swiglu_backward<uint16_t, 1>(r, g, u, dm, dg, du, s);
  }
  check_launch();
}
void add(const void* a, const void* b, void* out, Elem t, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  const bool packed = packed_width(t, n, {a, b, out}) > 1;
  if (t == Elem::F32) {
    packed ? launch_add<float, 4>(a, b, out, n, s) : launch_add<float, 1>(a, b, out, n, s);
  } else {
    packed ? launch_add<uint16_t, 8>(a, b, out, n, s) : launch_add<uint16_t, 1>(a, b, out, n, s);
  }
  check_launch();
}

void embedding_forward(const void* run, Elem rt, int64_t run_begin, int64_t run_count, const int32_t* tokens,
                       int64_t num_tokens, int64_t hidden, void* x, Elem xt, cudaStream_t s) {
  if (num_tokens == 0 || run_count == 0) return;
  ZERO_LAUNCH(embedding_forward_kernel, row_grid(num_tokens), kThreads, 0, s, run, rt, run_begin, run_begin + run_count,
      tokens, num_tokens, hidden, x, xt);
  check_launch();
}
void embedding_backward(const void* dx, Elem dxt, int64_t hidden, const int32_t* by_id, const int32_t* ids,
                        const int32_t* id_start, int64_t num_ids, void* run, Elem rt, int64_t run_begin,
                        int64_t run_count, cudaStream_t s) {
  if (run_count == 0) return;
  CUDA_CHECK(kernels::memset_async(run, 0, size_t(run_count) * (rt == Elem::F32 ? 4 : 2), s));  // +0.0 in both types
  if (num_ids == 0) return;
  ZERO_LAUNCH(embedding_backward_kernel, row_grid(num_ids), kThreads, 0, s, dx, dxt, hidden, by_id, ids, id_start,
      num_ids, run, rt, run_begin, run_begin + run_count);
  check_launch();
}

void pooled_head_forward(const void* x, Elem xt, int64_t hidden, const int32_t* pooled, int64_t seqs,
                         const void* norm_w, Elem nt, const void* score, Elem st, float eps, float* rewards,
                         cudaStream_t s) {
  if (seqs == 0) return;
  ZERO_LAUNCH(pooled_head_forward_kernel, row_grid(seqs), kThreads, 0, s, x, xt, hidden, pooled, seqs, norm_w, nt,
      score, st, eps, rewards);
  check_launch();
}
void pooled_head_backward(const void* x, Elem xt, int64_t hidden, const int32_t* pooled, int64_t seqs,
                          const void* norm_w, Elem nt, const void* score, Elem st, float eps, const float* drewards,
                          void* dx, Elem dxt, int64_t rows, float* partials, void* d_norm, Elem dnt, void* d_score,
                          Elem dst, cudaStream_t s) {
  CUDA_CHECK(kernels::memset_async(dx, 0, size_t(rows * hidden) * (dxt == Elem::F32 ? 4 : 2), s));
  if (seqs > 0) {
    ZERO_LAUNCH(pooled_head_backward_kernel, row_grid(seqs), kThreads, 0, s, x, xt, hidden, pooled, seqs, norm_w, nt,
        score, st, eps, drewards, dx, dxt, partials);
    check_launch();
  }
  column_sum(partials, seqs, hidden, d_score, dst, s);
  column_sum(partials + seqs * hidden, seqs, hidden, d_norm, dnt, s);
}

void pair_loss(const float* rewards, const uint8_t* pair_mask, const float* margin, int64_t pairs, double center,
               float* drewards, PairLossSums* out, cudaStream_t s, const int32_t* group, int32_t groups) {
  ZERO_LAUNCH(pair_loss_kernel, 1, 1, 0, s, rewards, pair_mask, margin, pairs, center, drewards, out, group, groups);
  check_launch();
}

}  // namespace zero::model::cuda_kernels
