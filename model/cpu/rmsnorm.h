// RMSNorm over the columns of a [dim, n] buffer, as HF Qwen3RMSNorm: y = w * (x * rsqrt(mean(x^2) + eps)),
// all in fp32. Used for the layer norms (dim = hidden) and, on a [head_dim, heads*tokens] view, q_norm/k_norm.
#pragma once
#include <cstdint>

namespace zero::model::cpu {

// x, y: [dim, n]; w: [dim]; rstd: [n] (kept for backward). y may not alias x.
void rmsnorm_forward(const float* x, const float* w, int64_t dim, int64_t n, float eps, float* y, float* rstd);

// dy: [dim, n] -> dx: [dim, n] (overwritten), dw: [dim] (overwritten with the sum over all n columns), on up
// to `threads` threads (parallel.h): dx a column at a time, dw a slice of its elements at a time, each element
// summed over the columns in order, so the bits are the same at any thread count.
void rmsnorm_backward(const float* x, const float* w, const float* rstd, const float* dy, int64_t dim, int64_t n,
                      float* dx, float* dw, int threads = 1);

}  // namespace zero::model::cpu
