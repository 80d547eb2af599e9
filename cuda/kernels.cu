// The CUDA backend's element-wise kernels: grid-stride walks in 16-byte vectors (vector_pack.cuh; one element at a
// time where the operands' addresses allow none), one template per (dst, src) dtype pair and vector width, and a
// two-pass block reduction. See kernels.h for the numerics.
// Launches through cuda/kernel_launch.cuh, so the whole file also runs on the host under the SIMT
// emulator (tests/cuda/cuda_kernels_emulated_test.cpp).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/math/bf16.h"
#include "core/math/fixed_point.h"
#include "core/math/split_master.h"
#include "cuda/bf16_storage.cuh"
#include "cuda/check.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/kernels.h"
#include "cuda/vector_pack.cuh"

namespace zero::kernels {

// A fixed-point sum (Elem::FX64, core/math/fixed_point.h) as a storage type: read as its value, written by
// rounding to the fixed-point grid; add_kernel adds into one as integers.
struct Fx64 {
  int64_t q;
};
__device__ __forceinline__ float to_f32(Fx64 x) { return math::from_fixed(x.q); }
template <> __device__ __forceinline__ Fx64 from_f32<Fx64>(float x) { return Fx64{math::to_fixed(x)}; }

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;  // grid-stride beyond this (about 30 blocks per SM on an H100)


int blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return int(b < size_t(kMaxBlocks) ? b : size_t(kMaxBlocks));
}

// The per-element formulas of copy and add (the same at every vector width: the same bits).
template <class D, class S>
__device__ __forceinline__ D converted(S x) {
  return from_f32<D>(to_f32(x));
}
template <class D, class S>
__device__ __forceinline__ D added(D d, S s) {
  if constexpr (std::is_same_v<D, Fx64> && std::is_same_v<S, Fx64>)
    return Fx64{d.q + s.q};  // exact: integers
  else if constexpr (std::is_same_v<D, Fx64>)
    return Fx64{d.q + math::to_fixed(to_f32(s))};
  else
    return from_f32<D>(__fadd_rn(to_f32(d), to_f32(s)));
}

// Element-wise kernels walk their tensors in 16-byte vectors from `head` on (vector_pack.cuh), V elements a
// step (V = 1: one at a time, where the operands' addresses do not allow vectors).
template <class D, class S, int V>
__global__ void copy_kernel(D* __restrict__ d, const S* __restrict__ s, size_t n, size_t head) {
  for_each_vector<V>(n, head, [&](size_t i, auto width) {
    constexpr int W = decltype(width)::value;
    const Pack<S, W> sp = load_pack<S, W>(s, i);
    Pack<D, W> dp;
#pragma unroll
    for (int k = 0; k < W; ++k) dp.v[k] = converted<D>(sp.v[k]);
    store_pack<D, W>(d, i, dp);
  });
}

template <class D, class S, int V>
__global__ void add_kernel(D* __restrict__ d, const S* __restrict__ s, size_t n, size_t head) {
  for_each_vector<V>(n, head, [&](size_t i, auto width) {
    constexpr int W = decltype(width)::value;
    const Pack<S, W> sp = load_pack<S, W>(s, i);
    Pack<D, W> dp = load_pack<D, W>(d, i);
#pragma unroll
    for (int k = 0; k < W; ++k) dp.v[k] = added(dp.v[k], sp.v[k]);
    store_pack<D, W>(d, i, dp);
  });
}

// Sums kReduceThreads values of shared memory in a fixed tree order; thread 0 holds the result.
template <class A>
__device__ A block_sum(A* sh, A x) {
  sh[threadIdx.x] = x;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  return sh[0];
}

// Each thread's squares in fp64, in its walk's order (so the same tensor at the same alignment sums alike).
template <class T, int V>
__global__ void sum_squares_pass1(const T* __restrict__ s, size_t n, size_t head, double* partials) {
  __shared__ double sh[kReduceThreads];
  double acc = 0;
  for_each_vector<V>(n, head, [&](size_t i, auto width) {
    constexpr int W = decltype(width)::value;
    const Pack<T, W> p = load_pack<T, W>(s, i);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const double x = to_f32(p.v[k]);
      acc += x * x;
    }
  });
  const double b = block_sum(sh, acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = b;
}

// Counts the values not under `limit` in magnitude (NaN included; infinity: the non-finite ones). Integer
// counts: the vectors change no sum.
// The count of the block's share (block of blocks) of the walk, written to partials[blockIdx.x].
template <class T, int V>
__device__ void nonfinite_block(const T* __restrict__ s, size_t n, size_t head, size_t block, size_t blocks,
                                float limit, unsigned long long* partials) {
  __shared__ unsigned long long sh[kReduceThreads];
  unsigned long long bad = 0;
  for_each_vector_in<V>(n, head, block, blocks, [&](size_t i, auto width) {
    constexpr int W = decltype(width)::value;
    const Pack<T, W> p = load_pack<T, W>(s, i);
#pragma unroll
    for (int k = 0; k < W; ++k) bad += !(fabsf(to_f32(p.v[k])) < limit);
  });
  const unsigned long long b = block_sum(sh, bad);
  if (threadIdx.x == 0) partials[blockIdx.x] = b;
}
template <class T, int V>
__global__ void nonfinite_pass1(const T* __restrict__ s, size_t n, size_t head, float limit,
                                unsigned long long* partials) {
  nonfinite_block<T, V>(s, n, head, blockIdx.x, gridDim.x, limit, partials);
}

// count_nonfinite over up to kMaxCountRuns consecutive runs in one grid: blocks [r B, (r + 1) B) walk run r
// (B = per_run), each from the run's own aligned head, and write their partials in that order.
struct CountRuns {
  size_t ends[kMaxCountRuns];  // run r: [ends[r - 1], ends[r]), ends[-1] = 0
  int per_run;
};
template <class T, int V>
__global__ void nonfinite_runs_pass1(const T* __restrict__ s, CountRuns c, float limit,
                                     unsigned long long* partials) {
  const int r = int(blockIdx.x) / c.per_run;
  const size_t begin = r == 0 ? 0 : c.ends[r - 1], n = c.ends[r] - begin;
  const T* run = s + begin;
  nonfinite_block<T, V>(run, n, own_head(run, n), blockIdx.x % c.per_run, c.per_run, limit, partials);
}
// Block r adds run r's per_run partials into acc[r].
__global__ void nonfinite_runs_pass2(const unsigned long long* __restrict__ partials, int per_run, double* acc) {
  __shared__ unsigned long long sh[kReduceThreads];
  unsigned long long a = 0;
  for (int i = threadIdx.x; i < per_run; i += blockDim.x) a += partials[size_t(blockIdx.x) * per_run + i];
  const unsigned long long b = block_sum(sh, a);
  if (threadIdx.x == 0) acc[blockIdx.x] += double(b);
}

// Pass 2: one block of kReduceThreads sums `count` partials (each thread a fixed stride, then the tree) into
// *out, or adds the sum to it (`add`: the step's accumulators, one launch where a separate add took another).
template <class A>
__global__ void reduce_pass2(const A* __restrict__ partials, int count, A* out, bool add) {
  __shared__ A sh[kReduceThreads];
  A acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  const A b = block_sum(sh, acc);
  if (threadIdx.x == 0) *out = add ? *out + b : b;
}

// The exact sum of squares of fixed-point values: per thread, then the block's in a fixed tree (integer
// sums: any order gives the same), one partial per block; pass 2 adds the partials into *acc. Shared memory
// holds the sums as plain words (3 a thread): a __shared__ array of a type with member initializers would
// need dynamic initialization, which CUDA does not do.
__device__ void block_fixed_sum(uint64_t* sh, math::FixedSquareSum& x) {
  for (int k = 0; k < 3; ++k) sh[3 * threadIdx.x + k] = x.w[k];
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) {
      uint64_t* a = sh + 3 * threadIdx.x;
      const uint64_t* b = sh + 3 * (threadIdx.x + w);
      math::FixedSquareSum sum;
      for (int k = 0; k < 3; ++k) sum.w[k] = a[k];
      sum.add(b[0], b[1], b[2]);
      for (int k = 0; k < 3; ++k) a[k] = sum.w[k];
    }
    __syncthreads();
  }
  for (int k = 0; k < 3; ++k) x.w[k] = sh[k];
}

__global__ void fixed_square_sum_pass1(const int64_t* __restrict__ s, size_t n, math::FixedSquareSum* partials) {
  __shared__ uint64_t sh[3 * kReduceThreads];
  math::FixedSquareSum acc;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    acc.add_square(s[i]);
  block_fixed_sum(sh, acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void fixed_square_sum_pass2(const math::FixedSquareSum* __restrict__ partials, int count,
                                       math::FixedSquareSum* acc) {
  __shared__ uint64_t sh[3 * kReduceThreads];
  math::FixedSquareSum x;
  for (int i = threadIdx.x; i < count; i += blockDim.x) x.add(partials[i]);
  block_fixed_sum(sh, x);
  if (threadIdx.x == 0) acc->add(x);
}

// The per-element update optim::adamw_step runs on the CPU (core/math/adamw_math.h).
template <class G, int V>
__global__ void adamw_kernel(float* __restrict__ param, const G* __restrict__ grad, float* __restrict__ m,
                             float* __restrict__ v, size_t n, size_t head, math::AdamWScalars k) {
  for_each_vector<V>(n, head, [&](size_t i, auto width) {
    constexpr int W = decltype(width)::value;
    Pack<float, W> pp = load_pack<float, W>(param, i), mp = load_pack<float, W>(m, i), vp = load_pack<float, W>(v, i);
    const Pack<G, W> gp = load_pack<G, W>(grad, i);
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const math::AdamWState s = math::adamw_update({pp.v[e], mp.v[e], vp.v[e]}, to_f32(gp.v[e]), k);
      pp.v[e] = s.param, mp.v[e] = s.m, vp.v[e] = s.v;
    }
    store_pack<float, W>(param, i, pp);
    store_pack<float, W>(m, i, mp);
    store_pack<float, W>(v, i, vp);
  });
}

// The same update on a split master: joined, updated, split again in registers.
template <class G, int V>
__global__ void adamw_split_kernel(uint16_t* __restrict__ high, uint16_t* __restrict__ low, const G* __restrict__ grad,
                                   float* __restrict__ m, float* __restrict__ v, size_t n, size_t head,
                                   math::AdamWScalars k) {
  for_each_vector<V>(n, head, [&](size_t i, auto width) {
    constexpr int W = decltype(width)::value;
    Pack<uint16_t, W> hp = load_pack<uint16_t, W>(high, i), lp = load_pack<uint16_t, W>(low, i);
    Pack<float, W> mp = load_pack<float, W>(m, i), vp = load_pack<float, W>(v, i);
    const Pack<G, W> gp = load_pack<G, W>(grad, i);
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const math::AdamWState s =
          math::adamw_update({math::split_join(hp.v[e], lp.v[e]), mp.v[e], vp.v[e]}, to_f32(gp.v[e]), k);
      hp.v[e] = math::split_high(s.param), lp.v[e] = math::split_low(s.param);
      mp.v[e] = s.m, vp.v[e] = s.v;
    }
    store_pack<uint16_t, W>(high, i, hp);
    store_pack<uint16_t, W>(low, i, lp);
    store_pack<float, W>(m, i, mp);
    store_pack<float, W>(v, i, vp);
  });
}

__global__ void split_master_kernel(uint16_t* __restrict__ high, uint16_t* __restrict__ low, const float* __restrict__ src,
                                    size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    high[i] = math::split_high(src[i]);
    if (low) low[i] = math::split_low(src[i]);
  }
}

__global__ void join_master_kernel(float* __restrict__ dst, const uint16_t* __restrict__ high,
                                   const uint16_t* __restrict__ low, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = math::split_join(high[i], low[i]);
}

// Calls f(T*) with the element type of e (a null pointer of that type: a tag).
template <class F>
void with_elem(Elem e, F&& f) {
  if (e == Elem::F32) f(static_cast<float*>(nullptr));
  else if (e == Elem::FX64) f(static_cast<Fx64*>(nullptr));
  else f(static_cast<Bf16*>(nullptr));
}

size_t elem_size(Elem e) { return e == Elem::F32 ? 4 : e == Elem::FX64 ? 8 : 2; }

// Runs launch(width, head, steps) for the walk of n elements over `operands`, typed pointers whose types give the
// vectors' width and each operand's element size (walk_of: 16-byte vectors where their addresses allow, else one
// element at a time).
template <class Launch, class... T>
void launch_walk(size_t n, Launch&& launch, const T*... operands) {
  constexpr int V = vector_width<T...>();
  const Walk w = walk_of<V>(n, {Operand{operands, sizeof(T)}...});
  if (w.width == V) {
    launch(std::integral_constant<int, V>{}, w.head, w.steps);
  } else {
    launch(std::integral_constant<int, 1>{}, w.head, w.steps);
  }
}

}  // namespace

int reduce_blocks(size_t n) {
  const size_t b = (n + kReduceThreads - 1) / kReduceThreads;
  return int(b < size_t(kMaxReduceBlocks) ? (b > 0 ? b : 1) : size_t(kMaxReduceBlocks));
}

void copy(void* dst, Elem dt, const void* src, Elem st, size_t n, cudaStream_t s) {
  if (n == 0) return;
  if (dt == st) {  // same type: a plain device copy
    CUDA_CHECK(memcpy_async(dst, src, n * elem_size(dt), s));
    return;
  }
  with_elem(dt, [&](auto* dtag) {
    using D = std::remove_pointer_t<decltype(dtag)>;
    with_elem(st, [&](auto* stag) {
      using S = std::remove_pointer_t<decltype(stag)>;
      D* const to = static_cast<D*>(dst);
      const S* const from = static_cast<const S*>(src);
      launch_walk(n, [&](auto width, size_t head, size_t steps) {
        auto* kernel = copy_kernel<D, S, decltype(width)::value>;  // one token for ZERO_LAUNCH
        ZERO_LAUNCH(kernel, blocks_for(steps), kThreads, 0, s, to, from, n, head);
      }, to, from);
    });
  });
  CUDA_CHECK(last_launch_error());
}

void add(void* dst, Elem dt, const void* src, Elem st, size_t n, cudaStream_t s) {
  if (n == 0) return;
  with_elem(dt, [&](auto* dtag) {
    using D = std::remove_pointer_t<decltype(dtag)>;
    with_elem(st, [&](auto* stag) {
      using S = std::remove_pointer_t<decltype(stag)>;
      D* const to = static_cast<D*>(dst);
      const S* const from = static_cast<const S*>(src);
      launch_walk(n, [&](auto width, size_t head, size_t steps) {
        auto* kernel = add_kernel<D, S, decltype(width)::value>;
        ZERO_LAUNCH(kernel, blocks_for(steps), kThreads, 0, s, to, from, n, head);
      }, to, from);
    });
  });
  CUDA_CHECK(last_launch_error());
}

void sum_squares(const void* src, Elem t, size_t n, double* partials, double* out, cudaStream_t s, bool add) {
  int blocks = 1;
  with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* const from = static_cast<const T*>(src);
    launch_walk(n, [&](auto width, size_t head, size_t steps) {
      auto* kernel = sum_squares_pass1<T, decltype(width)::value>;
      blocks = reduce_blocks(steps);
      ZERO_LAUNCH(kernel, blocks, kReduceThreads, 0, s, from, n, head, partials);
    }, from);
  });
  CUDA_CHECK(last_launch_error());
  ZERO_LAUNCH(reduce_pass2<double>, 1, kReduceThreads, 0, s, static_cast<const double*>(partials), blocks, out, add);
  CUDA_CHECK(last_launch_error());
}

void count_nonfinite(const void* src, Elem t, size_t n, float limit, unsigned long long* partials,
                     unsigned long long* out, cudaStream_t s) {
  int blocks = 1;
  with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* const from = static_cast<const T*>(src);
    launch_walk(n, [&](auto width, size_t head, size_t steps) {
      auto* kernel = nonfinite_pass1<T, decltype(width)::value>;
      blocks = reduce_blocks(steps);
      ZERO_LAUNCH(kernel, blocks, kReduceThreads, 0, s, from, n, head, limit, partials);
    }, from);
  });
  CUDA_CHECK(last_launch_error());
  ZERO_LAUNCH(reduce_pass2<unsigned long long>, 1, kReduceThreads, 0, s,
              static_cast<const unsigned long long*>(partials), blocks, out, false);
  CUDA_CHECK(last_launch_error());
}

void accumulate_nonfinite_runs(const void* src, Elem t, const size_t* ends, size_t runs, float limit,
                               unsigned long long* partials, double* acc, cudaStream_t s) {
  with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int V = vector_width<T>();
    size_t begin = 0;  // of this launch's first run
    for (size_t r0 = 0; r0 < runs; r0 += kMaxCountRuns) {
      const int k = int(std::min<size_t>(kMaxCountRuns, runs - r0));
      CountRuns c{};
      size_t longest = 0;
      for (int r = 0; r < k; ++r) {
        c.ends[r] = ends[r0 + r] - begin;
        longest = std::max(longest, c.ends[r] - (r == 0 ? 0 : c.ends[r - 1]));
      }
      // Each run as many blocks as its longest needs, within the partials' kMaxReduceBlocks.
      c.per_run = std::max(1, std::min(reduce_blocks((longest + V - 1) / V), kMaxReduceBlocks / k));
      auto* pass1 = nonfinite_runs_pass1<T, V>;  // one token for ZERO_LAUNCH
      ZERO_LAUNCH(pass1, k * c.per_run, kReduceThreads, 0, s, static_cast<const T*>(src) + begin, c, limit, partials);
      CUDA_CHECK(last_launch_error());
      ZERO_LAUNCH(nonfinite_runs_pass2, k, kReduceThreads, 0, s, static_cast<const unsigned long long*>(partials),
                  c.per_run, acc + r0);
      CUDA_CHECK(last_launch_error());
      begin = ends[r0 + size_t(k) - 1];
    }
  });
}

void accumulate_fixed_square_sum(const int64_t* src, size_t n, math::FixedSquareSum* partials,
                                 math::FixedSquareSum* acc, cudaStream_t s) {
  if (n == 0) return;
  const int blocks = reduce_blocks(n);
  ZERO_LAUNCH(fixed_square_sum_pass1, blocks, kReduceThreads, 0, s, src, n, partials);
  CUDA_CHECK(last_launch_error());
  ZERO_LAUNCH(fixed_square_sum_pass2, 1, kReduceThreads, 0, s, static_cast<const math::FixedSquareSum*>(partials),
              blocks, acc);
  CUDA_CHECK(last_launch_error());
}

void adamw(float* param, const void* grad, Elem gt, float* m, float* v, size_t n, const math::AdamWScalars& k,
           cudaStream_t s) {
  if (n == 0) return;
  with_elem(gt, [&](auto* tag) {
    using G = std::remove_pointer_t<decltype(tag)>;
    const G* const g = static_cast<const G*>(grad);
    launch_walk(n, [&](auto width, size_t head, size_t steps) {
      auto* kernel = adamw_kernel<G, decltype(width)::value>;
      ZERO_LAUNCH(kernel, blocks_for(steps), kThreads, 0, s, param, g, m, v, n, head, k);
    }, param, m, v, g);
  });
  CUDA_CHECK(last_launch_error());
}

void split_master(void* high, uint16_t* low, const float* src, size_t n, cudaStream_t s) {
  if (n == 0) return;
  ZERO_LAUNCH(split_master_kernel, blocks_for(n), kThreads, 0, s, static_cast<uint16_t*>(high), low, src, n);
  CUDA_CHECK(last_launch_error());
}

void join_master(float* dst, const void* high, const uint16_t* low, size_t n, cudaStream_t s) {
  if (n == 0) return;
  ZERO_LAUNCH(join_master_kernel, blocks_for(n), kThreads, 0, s, dst, static_cast<const uint16_t*>(high), low, n);
  CUDA_CHECK(last_launch_error());
}

void adamw_split(void* high, uint16_t* low, const void* grad, Elem gt, float* m, float* v, size_t n,
                 const math::AdamWScalars& k, cudaStream_t s) {
  if (n == 0) return;
  with_elem(gt, [&](auto* tag) {
    using G = std::remove_pointer_t<decltype(tag)>;
    uint16_t* const hi = static_cast<uint16_t*>(high);
    const G* const g = static_cast<const G*>(grad);
    launch_walk(n, [&](auto width, size_t head, size_t steps) {
      auto* kernel = adamw_split_kernel<G, decltype(width)::value>;
      ZERO_LAUNCH(kernel, blocks_for(steps), kThreads, 0, s, hi, low, g, m, v, n, head, k);
    }, hi, low, m, v, g);
  });
  CUDA_CHECK(last_launch_error());
}

namespace {
__global__ void accumulate_count_kernel(double* acc, const unsigned long long* x) { *acc += double(*x); }
}  // namespace

void accumulate_count(double* acc, const unsigned long long* x, cudaStream_t s) {
  ZERO_LAUNCH(accumulate_count_kernel, 1, 1, 0, s, acc, x);
  CUDA_CHECK(last_launch_error());
}

}  // namespace zero::kernels
