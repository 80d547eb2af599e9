// One RMSNorm row as Qwen3 computes it in fp32 (torch): y = w * (x * rstd) with
// rstd = 1 / sqrt(mean(x^2) + eps), and its backward, for the CPU model and the CUDA kernels.
// The per-element formulas and the per-row scalars are the shared part; a row's sums are the caller's
// to order: rmsnorm_row_forward / rmsnorm_row_backward sum in index order, a kernel may reduce in a tree
// and call the same per-element and per-row functions. Arithmetic through rounding.h; the sums are
// fused multiply-adds (one rounding per term).
#pragma once
#include <cstdint>

#include "core/math/hd.h"
#include "core/math/rounding.h"

namespace zero::math {

// 1 / sqrt(sum_squares / dim + eps): torch's rsqrt(x.pow(2).mean(-1) + eps), as an IEEE square root and
// division.
ZERO_HD float rmsnorm_rstd(float sum_squares, int64_t dim, float eps) {
  return div_rn(1.0f, sqrt_rn(add_rn(div_rn(sum_squares, float(dim)), eps)));
}

// y = w * (x * rstd), HF's order.
ZERO_HD float rmsnorm_y(float x, float w, float rstd) { return mul_rn(w, mul_rn(x, rstd)); }

// Backward, with xhat = x * rstd and dxhat = dy * w: dw += dy * xhat over the rows, and
// dx = (dxhat - xhat * mean(xhat * dxhat)) * rstd over the row, since d rstd / dx = -rstd^3 x / dim.
ZERO_HD float rmsnorm_dx(float xhat, float dxhat, float mean_xhat_dxhat, float rstd) {
  return mul_rn(sub_rn(dxhat, mul_rn(xhat, mean_xhat_dxhat)), rstd);
}

// Forward of one row of `dim` elements into y; returns its rstd (what backward needs).
ZERO_HD float rmsnorm_row_forward(const float* x, const float* w, int64_t dim, float eps, float* y) {
  float sum_squares = 0.0f;
  for (int64_t i = 0; i < dim; ++i) sum_squares = fma_rn(x[i], x[i], sum_squares);
  const float rstd = rmsnorm_rstd(sum_squares, dim, eps);
  for (int64_t i = 0; i < dim; ++i) y[i] = rmsnorm_y(x[i], w[i], rstd);
  return rstd;
}

// Backward of one row: writes dx, adds this row's dy * xhat into dw.
ZERO_HD void rmsnorm_row_backward(const float* x, const float* w, float rstd, const float* dy, int64_t dim,
                                  float* dx, float* dw) {
  float dot = 0.0f;  // sum of xhat * dxhat
  for (int64_t i = 0; i < dim; ++i) {
    const float xhat = mul_rn(x[i], rstd);
    dot = fma_rn(xhat, mul_rn(dy[i], w[i]), dot);
    dw[i] = fma_rn(dy[i], xhat, dw[i]);
  }
  const float mean = div_rn(dot, float(dim));
  for (int64_t i = 0; i < dim; ++i) dx[i] = rmsnorm_dx(mul_rn(x[i], rstd), mul_rn(dy[i], w[i]), mean, rstd);
}

}  // namespace zero::math
