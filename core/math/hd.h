// ZERO_HD marks per-element math that both backends compile: g++ for the CPU backend and nvcc for the
// CUDA kernels include the same header, so a formula exists once and rounds the same on both sides.
#pragma once

#if defined(__CUDACC__)
#define ZERO_HD __host__ __device__ __forceinline__
#else
#define ZERO_HD inline
#endif
