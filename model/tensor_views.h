// Eigen views over raw fp32 buffers: activations are column-major [features, tokens] (one token per
// column, so a column is the same memory as torch's row of a [tokens, features] tensor), weights are
// torch row-major [out, in]. No storage of its own.
#pragma once
#include <cstdint>

#include <Eigen/Core>

namespace zero::model {

using Mat = Eigen::MatrixXf;  // activations [features, tokens], column-major
using Vec = Eigen::VectorXf;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<Mat>;
using ConstMatMap = Eigen::Map<const Mat>;
using WeightMap = Eigen::Map<const RowMat>;  // a torch [out, in] weight
using GradMap = Eigen::Map<RowMat>;          // its gradient

// y[out, N] = W[out, in] x[in, N] (torch's F.linear without bias).
inline void linear_forward(const float* w, int64_t out, int64_t in, const Mat& x, Mat& y) {
  y.resize(out, x.cols());
  y.noalias() = WeightMap(w, out, in) * x;
}

// Given dy[out, N]: dw = dy x^T (overwritten), dx = W^T dy (overwritten, or added when accumulate).
inline void linear_backward(const float* w, int64_t out, int64_t in, const Mat& x, const Mat& dy, float* dw, Mat& dx,
                            bool accumulate) {
  GradMap(dw, out, in).noalias() = dy * x.transpose();
  if (accumulate) {
    dx.noalias() += WeightMap(w, out, in).transpose() * dy;
  } else {
    dx.resize(in, dy.cols());
    dx.noalias() = WeightMap(w, out, in).transpose() * dy;
  }
}

}  // namespace zero::model
