// Launchers for the CUDA backend's element-wise kernels (kernels.cu), on a given stream. A plain
// interface with no project headers, so nvcc never compiles Eigen or fmt. Element counts, not bytes.
// Numerics match zero/cpu_ops.cpp element by element: bf16 is stored as its 16 bits and converted by
// core/math/bf16.h (the CPU backend's conversion), adds are fp32, AdamW is optim/adamw.cpp's expression
// order, fused where gcc fuses it (see kernels.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace zero::kernels {

enum class Elem : int { F32 = 0, BF16 = 1 };

// Reductions: pass 1 runs a grid fixed by n (reduce_blocks(n) blocks of kReduceThreads), each block
// writing one partial; pass 2 sums the partials in one block. Same n, same order: deterministic.
constexpr int kReduceThreads = 256;
constexpr int kMaxReduceBlocks = 512;
int reduce_blocks(size_t n);

// AdamW's per-step scalars, computed on the host exactly as optim::adamw_step does.
struct AdamWScalars {
  float step_size, bc2_sqrt, decay_factor, one_minus_b1, one_minus_b2, beta2, eps, grad_scale;
};

// All launchers report launch errors through CUDA_CHECK (they throw zero::Error).
void copy(void* dst, Elem dt, const void* src, Elem st, size_t n, cudaStream_t s);  // dst = (dt) src
void add(void* dst, Elem dt, const void* src, Elem st, size_t n, cudaStream_t s);   // dst = dt(f32(dst) + f32(src))
// *out = sum of float(src[i])^2 in fp64. partials: kMaxReduceBlocks doubles of device scratch.
void sum_squares(const void* src, Elem t, size_t n, double* partials, double* out, cudaStream_t s);
// *out = number of NaN / inf elements. partials: kMaxReduceBlocks counters of device scratch.
void count_nonfinite(const void* src, Elem t, size_t n, unsigned long long* partials, unsigned long long* out,
                     cudaStream_t s);
void adamw(float* param, const void* grad, Elem gt, float* m, float* v, size_t n, const AdamWScalars& k,
           cudaStream_t s);

}  // namespace zero::kernels
