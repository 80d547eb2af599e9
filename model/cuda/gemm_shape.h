// The linear layers as column-major GEMMs (cuBLASLt's convention), host-only so that CPU tests check it.
// A row-major activation [rows, f] is a column-major [f, rows] matrix with leading dimension f, and a
// torch weight [out, in] is column-major [in, out] with leading dimension in, so:
//   forward       y^T  [out, rows] = op_T(w) [out, in]  * x^T  [in, rows]
//   input grad    dx^T [in, rows]  = w^T     [in, out]  * dy^T [out, rows]      (beta 1 to accumulate)
//   weight grad   dw^T [in, out]   = x^T     [in, rows] * op_T(dy^T) [rows, out]
// D = op(A) * op(B) with op(A) [m, k], op(B) [k, n], D [m, n]. Only the real token rows take part:
// rows = the plan's tokens, so rows past them are never read. As cuBLASLt sees each product (a matrix
// layout is (rows, cols, ld) of the stored column-major matrix, element (i, j) at i + j * ld):
//   op        A (transa)                B (transb)                 D               m    n     k
//   forward   w:  (in, out, in)   T     x:  (in, rows, in)    N    y:  (out, rows, out)  out  rows  in
//   in. grad  w:  (in, out, in)   N     dy: (out, rows, out)  N    dx: (in, rows, in)    in   rows  out
//   w. grad   x:  (in, rows, in)  N     dy: (out, rows, out)  T    dw: (in, out, in)     in   out   rows
// (stored_a / stored_b / stored_d below give those layouts; tests/model/cuda_host_logic_test.cpp runs each
// product through a plain column-major GEMM and compares it with the row-major definition.)
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

// The stored column-major matrix of an operand as cuBLASLt's matrix layout takes it: rows, cols, ld.
struct StoredMatrix {
  int64_t rows = 0, cols = 0, ld = 0;
  bool operator==(const StoredMatrix&) const = default;
};
inline StoredMatrix stored_a(const GemmShape& s) { return {s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda}; }
inline StoredMatrix stored_b(const GemmShape& s) { return {s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb}; }
inline StoredMatrix stored_d(const GemmShape& s) { return {s.m, s.n, s.ldd}; }

// The largest power of two up to 256 that divides an address. cuBLASLt's heuristic assumes 256-byte aligned
// operands unless CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES says less (its default is 256), and an
// algorithm picked for 256 may refuse (CUBLAS_STATUS_NOT_SUPPORTED) or misread a less aligned pointer. Weights
// are views inside a group's flat buffer: on the tiny fixture in bf16, gate_proj starts 16 bytes past a
// 256-byte boundary (after the 12-element q_norm / k_norm), and an engine group starts on a 128-byte one.
inline uint32_t pointer_alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// One cached cuBLASLt plan per key: the shape, the types (inputs, output; fp32 inputs compute in plain
// fp32, bf16 inputs in fp32 with bf16 multiplies) and the operands' alignment (pointer_alignment; the
// plan's algorithm is chosen for it, so a less aligned operand gets a plan of its own).
struct GemmKey {
  GemmShape shape;
  DType in = DType::F32;   // A and B
  DType out = DType::F32;  // C and D
  uint32_t align_a = 256, align_b = 256, align_c = 256, align_d = 256;  // bytes (C: D's layout, its own address)
  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    size_t h = 0;
    auto mix = [&h](int64_t v) { h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    const GemmShape& s = k.shape;
    for (int64_t v : {int64_t(s.trans_a), int64_t(s.trans_b), s.m, s.n, s.k, s.lda, s.ldb, s.ldd, int64_t(k.in),
                      int64_t(k.out), int64_t(k.align_a), int64_t(k.align_b), int64_t(k.align_c),
                      int64_t(k.align_d)})
      mix(v);
    return h;
  }
};

// The output type cuBLASLt writes for inputs of type `in` and a destination of type `dest`: bf16 inputs
// write fp32 or bf16 directly; fp32 inputs only write fp32 (a bf16 destination goes through fp32 scratch).
inline DType gemm_output_type(DType in, DType dest) { return in == DType::BF16 ? dest : DType::F32; }

}  // namespace zero::model::cuda_gemm
