// Eigen views over fp32 host tensors, for the CPU backend: an activation [rows, features] (row-major, one
// token per row) is an Eigen column-major [features, rows] matrix (one token per column); weights are torch
// row-major [out, in]. No storage of its own.
#pragma once
#include <cstdint>

#include <Eigen/Core>

#include "core/check.h"
#include "model/tensor_ref.h"

namespace zero::model::cpu {

using Mat = Eigen::MatrixXf;  // [features, tokens], column-major
using Vec = Eigen::VectorXf;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<Mat>;
using ConstMatMap = Eigen::Map<const Mat>;
using WeightMap = Eigen::Map<const RowMat>;  // a torch [out, in] weight
using GradMap = Eigen::Map<RowMat>;          // its gradient

inline float* f32(const TensorRef& t) {
  ZERO_CHECK(t.dtype == DType::F32, "the CPU backend keeps activations in fp32, got {}", dtype_name(t.dtype));
  return t.as<float>();
}
// An activation [rows, features] as Eigen [features, rows].
inline MatMap columns(const TensorRef& t) { return MatMap(f32(t), t.row_elems(), t.rows()); }

}  // namespace zero::model::cpu
