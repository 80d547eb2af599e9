// cuBLASLt GEMMs for the model's linear layers, on one stream: a plan (matmul descriptor, layouts, algorithm)
// per GemmKey, made on first use and cached (at most kMaxCachedPlans). The algorithm is the first result of
// cublasLtMatmulAlgoGetHeuristic for a fixed workspace size; the heuristic is deterministic for a given GPU and
// cuBLASLt version, so a shape always runs the same algorithm (never chosen by timing), and reductions that
// use atomics are excluded, so two runs give the same bits. fp32 inputs compute in CUBLAS_COMPUTE_32F
// (TF32 off, for parity with the CPU); bf16 inputs in fp32 accumulation.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>

#include "model/cuda/gemm_shape.h"

namespace zero::model::cuda_gemm {

class LtGemm {
 public:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  // At most this many plans are kept (about 1 KiB of host memory each; the model has 21 GEMMs per token count).
  static constexpr size_t kMaxCachedPlans = 4096;

  explicit LtGemm(cudaStream_t stream);  // allocates the workspace on the current device
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // D = op(A) op(B) + beta C; A, B of type key.in, C and D of type key.out (gemm_output_type) in one layout;
  // C may be D. The key's alignment fields are ignored: run() reads them off a, b, c and d.
  void run(const GemmKey& key, const void* a, const void* b, const void* c, void* d, float beta);
  void run(const GemmKey& key, const void* a, const void* b, void* d, float beta) { run(key, a, b, d, d, beta); }
  size_t cached_plans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zero::model::cuda_gemm
