// The reward model's CUDA kernels (see model_kernels.h): one block per row for the norms and the head,
// grid-stride loops for element-wise work, fixed-order tree sums in shared memory, and column sums of
// per-block partials for the weight gradients. Per-element math from core/math, as on the CPU. Launches
// through cuda/kernel_launch.cuh, so the whole file also runs on the host under the SIMT emulator
// (tests/cuda/model_kernels_emulated_test.cpp).
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "core/math/activations.h"
#include "core/math/bf16.h"
#include "core/math/rmsnorm_row.h"
#include "core/math/rope_math.h"
#include "cuda/check.h"
#include "cuda/dynamic_shared.cuh"
#include "cuda/kernel_launch.cuh"
#include "model/cuda/model_kernels.h"

namespace zero::model::cuda_kernels {
namespace {

using math::add_rn;
using math::fma_rn;
using math::mul_rn;

constexpr int kMaxBlocks = 4096;       // element-wise grids (grid-stride beyond)
constexpr int kMaxNormBlocks = 256;    // norm backward partials; forward grids are capped alike
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

// The sum of one value per thread, in a fixed tree order (blockDim.x: a power of two up to kThreads);
// every thread gets it. `red`: kThreads floats of shared memory. The leading barrier lets a block call it
// again safely.
__device__ float block_sum(float* red, float x) {
  __syncthreads();
  red[threadIdx.x] = x;
  __syncthreads();
  for (int w = int(blockDim.x) / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) red[threadIdx.x] = add_rn(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  return red[0];
}

// Threads of a one-block-per-row kernel (norms, the score head) for rows of `dim` elements: the power of
// two covering a row, 32 to kThreads. A q/k-norm row of 128 (Qwen3's head_dim) takes 128 threads, not 256
// of which half would idle through every level of block_sum's tree.
int row_threads(int64_t dim) {
  int t = 32;
  while (t < kThreads && t < dim) t *= 2;
  return t;
}

int grid_for(int64_t n) { return int(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks))); }
int row_grid(int64_t rows) { return int(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxRowBlocks))); }

void check_launch() { CUDA_CHECK(kernels::last_launch_error()); }

// ---- norms ------------------------------------------------------------------------------------------
// Shared memory: kThreads floats for the sums, then `dim` floats for a row (rope only).
__global__ void norm_forward_kernel(const void* x, Elem xt, const void* w, Elem wt, int64_t rows, int64_t dim,
                                    float eps, void* y, Elem yt, float* rstd, const float* cosv, const float* sinv,
                                    int64_t heads, int64_t x_ld) {
  float* sh = reinterpret_cast<float*>(kernels::dynamic_shared());
  float* red = sh;
  float* row = sh + kThreads;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * dim, xbase = (r / heads) * x_ld + (r % heads) * dim;
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float v = ld(x, xt, xbase + i);
      acc = fma_rn(v, v, acc);
    }
    const float rs = math::rmsnorm_rstd(block_sum(red, acc), dim, eps);
    if (threadIdx.x == 0) rstd[r] = rs;
    if (cosv == nullptr) {
      for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
        st(y, yt, base + i, math::rmsnorm_y(ld(x, xt, xbase + i), ld(w, wt, i), rs));
      continue;
    }
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) row[i] = math::rmsnorm_y(ld(x, xt, xbase + i), ld(w, wt, i), rs);
    __syncthreads();
    const int64_t half = dim / 2, tok = r / heads;
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const math::RopePair p = math::rope_rotate({row[i], row[i + half]}, cosv[tok * half + i], sinv[tok * half + i]);
      st(y, yt, base + i, p.a);
      st(y, yt, base + i + half, p.b);
    }
    __syncthreads();  // the row buffer is rewritten by the next row
  }
}

// Block b handles rows b, b + gridDim.x, ... and owns partials[b, :] (zeroed here first).
__global__ void norm_backward_kernel(const void* x, Elem xt, const void* w, Elem wt, const float* rstd, const void* dy,
                                     Elem dyt, int64_t rows, int64_t dim, void* dx, Elem dxt, float* partials,
                                     const float* cosv, const float* sinv, int64_t heads, int64_t x_ld, int64_t dx_ld) {
  float* sh = reinterpret_cast<float*>(kernels::dynamic_shared());
  float* red = sh;
  float* dn = sh + kThreads;  // dy, rotated back when rope
  float* part = partials + int64_t(blockIdx.x) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) part[i] = 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * dim, xbase = (r / heads) * x_ld + (r % heads) * dim,
                  dxbase = (r / heads) * dx_ld + (r % heads) * dim;
    if (cosv == nullptr) {
      for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dn[i] = ld(dy, dyt, base + i);
    } else {
      const int64_t half = dim / 2, tok = r / heads;
      for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
        const math::RopePair p = math::rope_rotate_transpose({ld(dy, dyt, base + i), ld(dy, dyt, base + i + half)},
                                                             cosv[tok * half + i], sinv[tok * half + i]);
        dn[i] = p.a;
        dn[i + half] = p.b;
      }
    }
    __syncthreads();
    const float rs = rstd[r];
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float xhat = mul_rn(ld(x, xt, xbase + i), rs);
      acc = fma_rn(xhat, mul_rn(dn[i], ld(w, wt, i)), acc);
      part[i] = fma_rn(dn[i], xhat, part[i]);
    }
    const float mean = math::div_rn(block_sum(red, acc), float(dim));
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float xhat = mul_rn(ld(x, xt, xbase + i), rs);
      st(dx, dxt, dxbase + i, math::rmsnorm_dx(xhat, mul_rn(dn[i], ld(w, wt, i)), mean, rs));
    }
    __syncthreads();  // dn is rewritten by the next row
  }
}

// out[c] = sum over b < blocks of partials[b, c], b ascending (one thread per column).
__global__ void column_sum_kernel(const float* partials, int64_t blocks, int64_t dim, void* out, Elem ot) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < dim; c += int64_t(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) acc = add_rn(acc, partials[b * dim + c]);
    st(out, ot, c, acc);
  }
}

// ---- element-wise -----------------------------------------------------------------------------------
#define ZERO_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// Element-wise kernels over tensors of one type T (uint16_t: bf16 bits, or float), V elements a thread: V = 1,
// or 16 bytes' worth (one load or store per operand) where sizes, strides and alignment allow (packed_width).
// One element a thread behind a type test ran SwiGLU at about 30% of the H200's bandwidth
// (bench/results/gpu_20261128_h200). The per-element formulas are the same at every width: the same bits.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
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
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const void* base, int64_t element) {
  return *reinterpret_cast<const Pack<T, V>*>(static_cast<const T*>(base) + element);
}
template <typename T, int V>
__device__ __forceinline__ void store_pack(void* base, int64_t element, const Pack<T, V>& p) {
  *reinterpret_cast<Pack<T, V>*>(static_cast<T*>(base) + element) = p;
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

// The conversions between fp32 and bf16 (the GEMM operands and outputs in another type than the mode's), 4
// elements a thread: 16 bytes of fp32, 8 of bf16.
template <typename D, typename S>
__global__ void convert_packed_kernel(void* dst, const void* src, int64_t n) {
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * 4; i < n; i += int64_t(gridDim.x) * blockDim.x * 4) {
    const Pack<S, 4> sp = load_pack<S, 4>(src, i);
    Pack<D, 4> dp;
    for (int k = 0; k < 4; ++k) dp.v[k] = from_f32<D>(as_f32(sp.v[k]));
    store_pack<D, 4>(dst, i, dp);
  }
}
constexpr auto convert_f32_to_bf16x4 = convert_packed_kernel<uint16_t, float>;
constexpr auto convert_bf16_to_f32x4 = convert_packed_kernel<float, uint16_t>;

__global__ void convert_kernel(void* dst, Elem dt, const void* src, Elem stype, int64_t n) {
  ZERO_GRID_LOOP(i, n) st(dst, dt, i, ld(src, stype, i));
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
// The pooled row's rstd, as norm_forward computes it (same loop, same tree).
__device__ float pooled_rstd(float* red, const void* x, Elem xt, int64_t base, int64_t hidden, float eps) {
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = ld(x, xt, base + i);
    acc = fma_rn(v, v, acc);
  }
  return math::rmsnorm_rstd(block_sum(red, acc), hidden, eps);
}

__global__ void pooled_head_forward_kernel(const void* x, Elem xt, int64_t hidden, const int32_t* pooled, int64_t seqs,
                                           const void* norm_w, Elem nt, const void* score, Elem stype, float eps,
                                           float* rewards) {
  __shared__ float red[kThreads];
  for (int64_t q = blockIdx.x; q < seqs; q += gridDim.x) {
    const int64_t base = int64_t(pooled[q]) * hidden;
    const float rs = pooled_rstd(red, x, xt, base, hidden, eps);
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x)
      acc = fma_rn(ld(score, stype, i), math::rmsnorm_y(ld(x, xt, base + i), ld(norm_w, nt, i), rs), acc);
    const float r = block_sum(red, acc);
    if (threadIdx.x == 0) rewards[q] = r;
  }
}

// partials: [seqs, hidden] of d_score terms, then [seqs, hidden] of d_norm terms.
__global__ void pooled_head_backward_kernel(const void* x, Elem xt, int64_t hidden, const int32_t* pooled,
                                            int64_t seqs, const void* norm_w, Elem nt, const void* score, Elem stype,
                                            float eps, const float* drewards, void* dx, Elem dxt, float* partials) {
  __shared__ float red[kThreads];
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
    const float mean = math::div_rn(block_sum(red, acc), float(hidden));
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float xhat = mul_rn(ld(x, xt, base + i), rs);
      const float dxhat = mul_rn(mul_rn(ld(score, stype, i), dr), ld(norm_w, nt, i));
      st(dx, dxt, base + i, math::rmsnorm_dx(xhat, dxhat, mean, rs));
    }
  }
}

// ---- the pair loss ----------------------------------------------------------------------------------
__global__ void pair_loss_kernel(const float* rewards, const uint8_t* mask, const float* margin, int64_t pairs,
                                 double center, float* drewards, PairLossSums* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  *out = math::pair_losses(rewards, mask, margin, pairs, center, drewards);
}

}  // namespace

int norm_partial_blocks(int64_t rows) { return int(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxNormBlocks))); }

void norm_forward(const void* x, Elem xt, const void* w, Elem wt, int64_t rows, int64_t dim, float eps, void* y,
                  Elem yt, float* rstd, const float* cos, const float* sin, int64_t heads, cudaStream_t s, int64_t x_ld) {
  if (rows == 0) return;
  const size_t shmem = sizeof(float) * size_t(kThreads + (cos ? dim : 0));
  const int64_t row_heads = cos ? heads : 1;  // without RoPE every row is a token's
  ZERO_LAUNCH(norm_forward_kernel, row_grid(rows), row_threads(dim), shmem, s, x, xt, w, wt, rows, dim, eps, y, yt, rstd, cos,
      sin, row_heads, x_ld ? x_ld : row_heads * dim);
  check_launch();
}

void norm_backward(const void* x, Elem xt, const void* w, Elem wt, const float* rstd, const void* dy, Elem dyt,
                   int64_t rows, int64_t dim, void* dx, Elem dxt, float* partials, void* dw, Elem dwt,
                   const float* cos, const float* sin, int64_t heads, cudaStream_t s, int64_t x_ld, int64_t dx_ld) {
  const int blocks = norm_partial_blocks(rows);
  const size_t shmem = sizeof(float) * size_t(kThreads + dim);
  const int64_t row_heads = cos ? heads : 1;
  ZERO_LAUNCH(norm_backward_kernel, blocks, row_threads(dim), shmem, s, x, xt, w, wt, rstd, dy, dyt, rows, dim, dx, dxt,
      partials, cos, sin, row_heads, x_ld ? x_ld : row_heads * dim, dx_ld ? dx_ld : row_heads * dim);
  check_launch();
  ZERO_LAUNCH(column_sum_kernel, grid_for(dim), kThreads, 0, s, partials, blocks, dim, dw, dwt);
  check_launch();
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
void convert(void* dst, Elem dt, const void* src, Elem st, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  // Four elements a thread between the two types (the fp32 side's 16 bytes), both tensors 16-byte aligned.
  const bool packed = dt != st && packed_width(Elem::F32, n, {dst, src}) == 4;
  if (!packed) {
    ZERO_LAUNCH(convert_kernel, grid_for(n), kThreads, 0, s, dst, dt, src, st, n);
  } else if (dt == Elem::BF16) {
    ZERO_LAUNCH(convert_f32_to_bf16x4, grid_for(n / 4), kThreads, 0, s, dst, src, n);
  } else {
    ZERO_LAUNCH(convert_bf16_to_f32x4, grid_for(n / 4), kThreads, 0, s, dst, src, n);
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
  ZERO_LAUNCH(pooled_head_forward_kernel, row_grid(seqs), row_threads(hidden), 0, s, x, xt, hidden, pooled, seqs, norm_w, nt,
      score, st, eps, rewards);
  check_launch();
}
void pooled_head_backward(const void* x, Elem xt, int64_t hidden, const int32_t* pooled, int64_t seqs,
                          const void* norm_w, Elem nt, const void* score, Elem st, float eps, const float* drewards,
                          void* dx, Elem dxt, int64_t rows, float* partials, void* d_norm, Elem dnt, void* d_score,
                          Elem dst, cudaStream_t s) {
  CUDA_CHECK(kernels::memset_async(dx, 0, size_t(rows * hidden) * (dxt == Elem::F32 ? 4 : 2), s));
  if (seqs > 0) {
    ZERO_LAUNCH(pooled_head_backward_kernel, row_grid(seqs), row_threads(hidden), 0, s, x, xt, hidden, pooled, seqs, norm_w, nt,
        score, st, eps, drewards, dx, dxt, partials);
    check_launch();
  }
  ZERO_LAUNCH(column_sum_kernel, grid_for(hidden), kThreads, 0, s, partials, seqs, hidden, d_score, dst);
  check_launch();
  ZERO_LAUNCH(column_sum_kernel, grid_for(hidden), kThreads, 0, s, partials + seqs * hidden, seqs, hidden, d_norm, dnt);
  check_launch();
}

void pair_loss(const float* rewards, const uint8_t* pair_mask, const float* margin, int64_t pairs, double center,
               float* drewards, PairLossSums* out, cudaStream_t s) {
  ZERO_LAUNCH(pair_loss_kernel, 1, 1, 0, s, rewards, pair_mask, margin, pairs, center, drewards, out);
  check_launch();
}

}  // namespace zero::model::cuda_kernels
