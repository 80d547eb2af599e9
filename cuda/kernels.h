// Launchers for the CUDA backend's element-wise kernels (kernels.cu), on a given stream. A plain
// interface whose only project headers are core/math's (no Eigen, no fmt: nvcc compiles them). Element
// counts, not bytes. Numerics match zero/cpu_ops.cpp element by element because both sides call the
// same functions: bf16 is stored as its 16 bits and converted by core/math/bf16.h, adds are fp32, and
// AdamW is core/math/adamw_math.h's update on the scalars optim::adamw_scalars computes.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/math/adamw_math.h"
#include "core/math/fixed_point.h"

namespace zero::kernels {

// FX64: a fixed-point sum (core/math/fixed_point.h): converted like the others, added as integers.
enum class Elem : int { F32 = 0, BF16 = 1, FX64 = 2 };

// Reductions: pass 1 runs a grid fixed by n and the operand's address modulo 16 bytes (its walk in 16-byte
// vectors, cuda/vector_pack.cuh: reduce_blocks(walk steps) blocks of kReduceThreads), each block writing one
// partial; pass 2 sums the partials in one block. Same n at the same alignment (a tensor at its place in a
// layout), same order: deterministic.
constexpr int kReduceThreads = 256;
constexpr int kMaxReduceBlocks = 512;
int reduce_blocks(size_t n);

// All launchers report launch errors through CUDA_CHECK (they throw zero::Error).
void copy(void* dst, Elem dt, const void* src, Elem st, size_t n, cudaStream_t s);  // dst = (dt) src
void add(void* dst, Elem dt, const void* src, Elem st, size_t n, cudaStream_t s);   // dst = dt(f32(dst) + f32(src))
// *out = sum of float(src[i])^2 in fp64, or *out += it (add: a device accumulator, in the second pass's launch).
// partials: kMaxReduceBlocks doubles of device scratch.
void sum_squares(const void* src, Elem t, size_t n, double* partials, double* out, cudaStream_t s, bool add = false);
// *out = number of elements not under limit in magnitude (NaN included; limit = infinity: the NaN / inf
// ones). partials: kMaxReduceBlocks counters of device scratch.
void count_nonfinite(const void* src, Elem t, size_t n, float limit, unsigned long long* partials,
                     unsigned long long* out, cudaStream_t s);
// acc[r] += count_nonfinite's count of run r of src, the elements [ends[r - 1], ends[r]) (ends[-1] = 0), for
// every r < runs: two launches for up to kMaxCountRuns runs (pass 1 gives each run its own blocks, walking it in
// 16-byte vectors from its own aligned head; pass 2 a block a run). Integer counts: the same in any order.
// partials: kMaxReduceBlocks counters of device scratch; acc in device memory.
constexpr int kMaxCountRuns = 64;
void accumulate_nonfinite_runs(const void* src, Elem t, const size_t* ends, size_t runs, float limit,
                               unsigned long long* partials, double* acc, cudaStream_t s);
// *acc += the exact sum of squares of n fixed-point values (device memory). partials: kMaxReduceBlocks
// FixedSquareSums of device scratch.
void accumulate_fixed_square_sum(const int64_t* src, size_t n, math::FixedSquareSum* partials,
                                 math::FixedSquareSum* acc, cudaStream_t s);
// *acc += *x on the device (the per-step partials stay in device memory until the step reads them).
void accumulate_count(double* acc, const unsigned long long* x, cudaStream_t s);
void adamw(float* param, const void* grad, Elem gt, float* m, float* v, size_t n, const math::AdamWScalars& k,
           cudaStream_t s);
// A split master (core/math/split_master.h): high is bf16 storage, low its low halves (null in split_master:
// the high halves only).
void split_master(void* high, uint16_t* low, const float* src, size_t n, cudaStream_t s);
void join_master(float* dst, const void* high, const uint16_t* low, size_t n, cudaStream_t s);
void adamw_split(void* high, uint16_t* low, const void* grad, Elem gt, float* m, float* v, size_t n,
                 const math::AdamWScalars& k, cudaStream_t s);

}  // namespace zero::kernels
