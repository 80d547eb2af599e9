// The cuBLASLt calls of model/cuda/lt_gemm.cpp, implemented on the host for the emulated backend: a
// matmul is D = alpha op(A) op(B) + beta C by the BLAS definition cuBLASLt documents (column-major
// layouts of `rows` x `cols` with leading dimension ld; op = transpose when TRANSA/TRANSB say so; C
// aliases D here), each output a fp32 sum over k ascending of products of the operands as stored (fp32,
// or bf16 widened exactly), each product rounded to fp32 before its add (no fused multiply-add: built with
// -ffp-contract=off), the sum rounded once to D's type (bf16: core/math's round to nearest even) — fp32
// accumulation as the hardware's, in one fixed order. Only what lt_gemm asks for is accepted: fp32
// compute and scale, no batch, no epilogue, no other attribute; anything else is
// CUBLAS_STATUS_NOT_SUPPORTED, so a new use in lt_gemm cannot be emulated silently wrong. The product runs
// when its stream gets to it (deferred_streams.h), with the descriptors and host scalars as the call saw them.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/math/bf16.h"
#include "tests/cuda/emulated/deferred_streams.h"

namespace {

struct Desc {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
};
struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
int fake_handle_tag = 0, fake_preference_tag = 0;

float load(const void* base, cudaDataType t, int64_t i) {
  return t == CUDA_R_32F ? static_cast<const float*>(base)[i]
                         : zero::math::bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
}
void store(void* base, cudaDataType t, int64_t i, float v) {
  if (t == CUDA_R_32F) static_cast<float*>(base)[i] = v;
  else static_cast<uint16_t*>(base)[i] = zero::math::f32_to_bf16(v);
}
bool supported(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = reinterpret_cast<cublasLtHandle_t>(&fake_handle_tag);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *d = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete reinterpret_cast<Desc*>(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  Desc* desc = reinterpret_cast<Desc*>(d);
  if (bytes != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_DESC_TRANSA) std::memcpy(&desc->trans_a, buf, bytes);
  else if (attr == CUBLASLT_MATMUL_DESC_TRANSB) std::memcpy(&desc->trans_b, buf, bytes);
  else return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  if (!supported(type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ld < int64_t(rows)) return CUBLAS_STATUS_INVALID_VALUE;
  *l = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete reinterpret_cast<Layout*>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(&fake_preference_tag);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;  // workspace, reduction schemes, alignments: no bearing on the host's loop
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t*, void*, size_t,
                              cudaStream_t stream) {
  const Desc desc = *reinterpret_cast<const Desc*>(computeDesc);
  const Layout a = *reinterpret_cast<const Layout*>(Adesc), b = *reinterpret_cast<const Layout*>(Bdesc),
               c = *reinterpret_cast<const Layout*>(Cdesc), d = *reinterpret_cast<const Layout*>(Ddesc);
  const bool ta = desc.trans_a == CUBLAS_OP_T, tb = desc.trans_b == CUBLAS_OP_T;
  const int64_t m = int64_t(d.rows), n = int64_t(d.cols), k = int64_t(ta ? a.rows : a.cols);
  // op(A) is m x k, op(B) k x n, C and D m x n: the stored shapes must agree.
  if (int64_t(ta ? a.cols : a.rows) != m || int64_t(tb ? b.cols : b.rows) != k || int64_t(tb ? b.rows : b.cols) != n ||
      c.rows != d.rows || c.cols != d.cols)
    return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  zero::fake_cuda::enqueue(stream, [=] {
    // op(A) as m rows of k and op(B) as k rows of n, widened to fp32 once; then a row of D's outputs is summed
    // at once, p ascending: each output's sum is still its own fp32 chain in the definition's order (the same
    // bits as one output at a time), while the loop over j runs in vector lanes, not one load dispatch a product.
    std::vector<float> op_a(static_cast<size_t>(m * k)), op_b(static_cast<size_t>(k * n)), acc(static_cast<size_t>(n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) op_a[size_t(i * k + p)] = load(A, a.type, ta ? p + i * a.ld : i + p * a.ld);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) op_b[size_t(p * n + j)] = load(B, b.type, tb ? j + p * b.ld : p + j * b.ld);
    for (int64_t i = 0; i < m; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p = 0; p < k; ++p) {
        const float x = op_a[size_t(i * k + p)];
        const float* y = op_b.data() + p * n;
        for (int64_t j = 0; j < n; ++j) acc[size_t(j)] += x * y[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        float out = al * acc[size_t(j)];
        if (be != 0.0f) out += be * load(C, c.type, i + j * c.ld);
        store(D, d.type, i + j * d.ld, out);
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS (emulated)" : "cuBLAS error (emulated)";
}

}  // extern "C"
