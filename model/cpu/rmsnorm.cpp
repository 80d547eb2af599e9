// RMSNorm forward and backward on column vectors.
#include "model/cpu/rmsnorm.h"

#include <cmath>

#include "core/math/rmsnorm_row.h"
#include "model/cpu/eigen_views.h"

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
                      float* dx, float* dw) {
  // xhat = x * r; y = w * xhat. dw = sum_c dy * xhat; dxhat = dy * w;
  // dx = r * (dxhat - xhat * mean(dxhat * xhat)) since d r / d x = -r^3 x / dim.
  ConstMatMap X(x, dim, n), DY(dy, dim, n);
  MatMap DX(dx, dim, n);
  Eigen::Map<const Vec> W(w, dim);
  Vec dW = Vec::Zero(dim);
  Vec xhat(dim), dxhat(dim);
  for (int64_t c = 0; c < n; ++c) {
    xhat = X.col(c) * rstd[c];
    dxhat = DY.col(c).cwiseProduct(W);
    dW += DY.col(c).cwiseProduct(xhat);
    const float mean = xhat.dot(dxhat) / float(dim);
    for (int64_t i = 0; i < dim; ++i) DX(i, c) = math::rmsnorm_dx(xhat[i], dxhat[i], mean, rstd[c]);
  }
  Eigen::Map<Vec>(dw, dim) = dW;
}

}  // namespace zero::model::cpu
