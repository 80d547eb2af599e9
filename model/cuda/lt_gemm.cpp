// LtGemm: cuBLASLt plans per shape, cached; see lt_gemm.h.
#include "model/cuda/lt_gemm.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <unordered_map>
#include <utility>

#include "core/check.h"
#include "cuda/check.h"
#include "cuda/launch_count.h"

namespace zero::model::cuda_gemm {

namespace {
cudaDataType_t cuda_type(DType t) {
  ZERO_CHECK(t == DType::F32 || t == DType::BF16, "gemm: {} operands are not supported", dtype_name(t));
  return t == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};
}  // namespace

struct LtGemm::Impl {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::unordered_map<GemmKey, Plan, GemmKeyHash> plans;

  ~Impl() {
    drop_plans();
    if (workspace) CUDA_WARN(cudaFree(workspace));
    if (handle) cublasLtDestroy(handle);
  }

  void drop_plans() {
    for (auto& [key, p] : plans) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.d);
      cublasLtMatmulDescDestroy(p.desc);
    }
    plans.clear();
  }

  const Plan& plan(const GemmKey& key) {
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    // Token-budget micro-batches give every GEMM a new token count now and then: past the bound the cache
    // starts afresh (a plan made again is the same plan: the heuristic is deterministic).
    if (plans.size() >= LtGemm::kMaxCachedPlans) drop_plans();
    const GemmShape& s = key.shape;
    ZERO_CHECK(s.m > 0 && s.n > 0 && s.k > 0, "gemm: empty problem m={} n={} k={}", s.m, s.n, s.k);
    ZERO_CHECK(key.out == gemm_output_type(key.in, key.out), "gemm: {} inputs cannot write {}", dtype_name(key.in),
               dtype_name(key.out));
    // Stored shapes (column-major, gemm_shape.h): A is [m, k] or, transposed, [k, m]; likewise B.
    const StoredMatrix sa = stored_a(s), sb = stored_b(s), sd = stored_d(s);
    for (const StoredMatrix& x : {sa, sb, sd})  // cuBLASLt would only say CUBLAS_STATUS_INVALID_VALUE
      ZERO_CHECK(x.ld >= x.rows, "gemm: leading dimension {} below the {} rows of a stored operand (m={} n={} k={})",
                 x.ld, x.rows, s.m, s.n, s.k);
    Plan p;
    // fp32 inputs: CUBLAS_COMPUTE_32F, never _FAST_TF32 (TF32 off: parity with the CPU's fp32 GEMMs).
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, cuda_type(key.in), uint64_t(sa.rows), uint64_t(sa.cols), sa.ld));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, cuda_type(key.in), uint64_t(sb.rows), uint64_t(sb.cols), sb.ld));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, cuda_type(key.out), uint64_t(sd.rows), uint64_t(sd.cols), sd.ld));

    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = kWorkspaceBytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    // Split-K partial sums only through the workspace in a fixed order: no in-place (atomic) reduction.
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                             CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
    // The operands' real alignment (the heuristic otherwise assumes 256 bytes; see pointer_alignment).
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d}};
    for (const auto& [attr, bytes] : aligns)
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.d);
      cublasLtMatmulDescDestroy(p.desc);
      throw Error(fmt::format("cuBLASLt has no algorithm for the GEMM m={} n={} k={} lda={} ldb={} ldd={} ({} inputs, "
                              "{} output; operands aligned to {}/{}/{}/{} bytes): {}", s.m, s.n, s.k, s.lda, s.ldb, s.ldd,
                              dtype_name(key.in), dtype_name(key.out), key.align_a, key.align_b, key.align_c, key.align_d,
                              found == 0 && st == CUBLAS_STATUS_SUCCESS ? "no result" : cublasGetStatusString(st)));
    }
    p.algo = result.algo;
    return plans.emplace(key, p).first->second;
  }
};

LtGemm::LtGemm(cudaStream_t stream) : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  CUDA_CHECK(cudaMalloc(&impl_->workspace, kWorkspaceBytes));
}

LtGemm::~LtGemm() = default;

void LtGemm::run(const GemmKey& key, const void* a, const void* b, const void* c, void* d, float beta) {
  GemmKey aligned = key;
  aligned.align_a = pointer_alignment(a), aligned.align_b = pointer_alignment(b);
  aligned.align_c = pointer_alignment(c), aligned.align_d = pointer_alignment(d);
  const Plan& p = impl_->plan(aligned);
  const float alpha = 1.0f;
  cuda_launch::count();
  CUBLAS_CHECK(cublasLtMatmul(impl_->handle, p.desc, &alpha, a, p.a, b, p.b, &beta, c, p.d, d, p.d, &p.algo,
                              impl_->workspace, kWorkspaceBytes, impl_->stream));
}

size_t LtGemm::cached_plans() const { return impl_->plans.size(); }

}  // namespace zero::model::cuda_gemm
