// RMSNorm forward and backward on column vectors.
#include "model/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "core/math/rmsnorm_row.h"
#include "model/cpu/eigen_views.h"
#include "model/cpu/parallel.h"

namespace zero::model::cpu {

void rmsnorm_forward(const float* x, const float* w, int64_t dim, int64_t n, float eps, float* y, float* rstd) {
  ConstMatMap X(x, dim, n);
  MatMap Y(y, dim, n);
  Eigen::Map<const Vec> W(w, dim);
  for (int64_t c = 0; c < n; ++c) {
    // The row's sum by Eigen (vectorised), the per-row and per-element formulas shared with the GPU.
    const float r = math::rmsnorm_rstd(X.col(c).squaredNorm(), dim, eps);
    rstd[c] = r;
    for (int64_t i = 0; i < dim; ++i) Y(i, c) = math::rmsnorm_y(X(i, c), W[i], r);
  }
}

void rmsnorm_backward(const float* x, const float* w, const float* rstd, const float* dy, int64_t dim, int64_t n,
                      float* dx, float* dw, int threads) {
  // xhat = x * r; y = w * xhat. dw = sum_c dy * xhat; dxhat = dy * w;
  // dx = r * (dxhat - xhat * mean(dxhat * xhat)) since d r / d x = -r^3 x / dim.
  ConstMatMap X(x, dim, n), DY(dy, dim, n);
  MatMap DX(dx, dim, n);
  Eigen::Map<const Vec> W(w, dim);
  parallel_rows(threads, n, dim, [&](int64_t c0, int64_t c1) {
    Vec xhat(dim), dxhat(dim);
    for (int64_t c = c0; c < c1; ++c) {
      xhat = X.col(c) * rstd[c];
      dxhat = DY.col(c).cwiseProduct(W);
      const float mean = xhat.dot(dxhat) / float(dim);
      for (int64_t i = 0; i < dim; ++i) DX(i, c) = math::rmsnorm_dx(xhat[i], dxhat[i], mean, rstd[c]);
    }
  });
  // dw: each element's terms dy * xhat added in column order, each operation rounded on its own (this file
  // has no contraction), a slice of kDwSlice elements an item, so that a thread reads whole cache lines.
  constexpr int64_t kDwSlice = 64;
  parallel_for(threads, (dim + kDwSlice - 1) / kDwSlice, [&](int64_t s) {
    const int64_t i0 = s * kDwSlice, len = std::min(kDwSlice, dim - i0);
    float acc[kDwSlice] = {};
    for (int64_t c = 0; c < n; ++c) {
      const float* xc = x + c * dim + i0;
      const float* dyc = dy + c * dim + i0;
      const float r = rstd[c];
      for (int64_t i = 0; i < len; ++i) acc[i] = math::add_rn(acc[i], math::mul_rn(dyc[i], math::mul_rn(xc[i], r)));
    }
    std::copy_n(acc, len, dw + i0);
  });
}

}  // namespace zero::model::cpu
