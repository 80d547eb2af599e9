// The linear layers as column-major GEMMs (cuBLASLt's convention), host-only so that CPU tests check it.
// A row-major activation [rows, f] is a column-major [f, rows] matrix with leading dimension f, and a
// torch weight [out, in] is column-major [in, out] with leading dimension in, so:
//   forward       y^T  [out, rows] = op_T(w) [out, in]  * x^T  [in, rows]
//   input grad    dx^T [in, rows]  = w^T     [in, out]  * dy^T [out, rows]      (beta 1 to accumulate)
//   weight grad   dw^T [in, out]   = x^T     [in, rows] * op_T(dy^T) [rows, out]
// D = op(A) * op(B) with op(A) [m, k], op(B) [k, n], D [m, n]. Only the real token rows take part:
// rows = the plan's tokens, so rows past them are never read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/dtype.h"

namespace zero::model::cuda_gemm {

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  bool operator==(const GemmShape&) const = default;
};

inline GemmShape linear_forward_shape(int64_t rows, int64_t in, int64_t out) {
  return {true, false, out, rows, in, in, in, out};
}
inline GemmShape linear_input_grad_shape(int64_t rows, int64_t in, int64_t out) {
  return {false, false, in, rows, out, in, out, in};
}
inline GemmShape linear_weight_grad_shape(int64_t rows, int64_t in, int64_t out) {
  return {false, true, in, out, rows, in, out, in};
}

// One cached cuBLASLt plan per key: the shape and the types (inputs, output; fp32 inputs compute in
// plain fp32, bf16 inputs in fp32 with bf16 multiplies).
struct GemmKey {
  GemmShape shape;
  DType in = DType::F32;   // A and B
  DType out = DType::F32;  // C and D
  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    size_t h = 0;
    auto mix = [&h](int64_t v) { h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    const GemmShape& s = k.shape;
    for (int64_t v : {int64_t(s.trans_a), int64_t(s.trans_b), s.m, s.n, s.k, s.lda, s.ldb, s.ldd, int64_t(k.in),
                      int64_t(k.out)})
      mix(v);
    return h;
  }
};

// The output type cuBLASLt writes for inputs of type `in` and a destination of type `dest`: bf16 inputs
// write fp32 or bf16 directly; fp32 inputs only write fp32 (a bf16 destination goes through fp32 scratch).
inline DType gemm_output_type(DType in, DType dest) { return in == DType::BF16 ? dest : DType::F32; }

}  // namespace zero::model::cuda_gemm
