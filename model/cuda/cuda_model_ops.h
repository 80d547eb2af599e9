// The CUDA backend of the reward model's ops: every ModelOps hook queued on one CUDA stream (the engine's
// compute stream, so the engine's element-wise work and the model's are ordered without host waits).
// GEMMs through cuBLASLt (lt_gemm.h), everything else our kernels (model_kernels.h, attention_kernels.h),
// activations from a caching pool (activation_pool.h), the micro-batch's token plan uploaded once
// (batch_upload.h). Two precision modes: bf16 (activations in bf16 where the model keeps them, bf16 GEMM
// inputs with fp32 accumulation; the residual stream, statistics, lse and rewards fp32) and fp32 (everything
// fp32, TF32 off: parity with the CPU backend). Rows past the plan's real tokens are never read.
// Needs a CUDA device (the current one); never includes an engine header.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>

#include "cuda/host_wait.h"
#include "model/cuda/activation_pool.h"
#include "model/model_ops.h"

namespace zero::model {

struct CudaModelOptions {
  cudaStream_t stream = nullptr;                // the compute stream (CudaOps::stream()); null: the legacy stream
  DType activation_dtype = DType::BF16;         // BF16: bf16 mode; F32: fp32 mode
  AttentionKind attention = AttentionKind::Auto;  // Auto, Flash, FlashFma or FlashWide (Reference is the CPU's)
};

class CudaModelOps : public ModelOps {
 public:
  virtual cudaStream_t stream() const = 0;
  virtual const cuda_pool::PoolStats& pool_stats() const = 0;
  // The most device scratch its ops held at once (from the pool, for the length of an op; not in ModelOps'
  // peak_bytes): what model::gpu_op_scratch_bytes plans for a batch.
  virtual size_t peak_scratch_bytes() const = 0;
  virtual size_t gemm_plans() const = 0;  // cuBLASLt plans cached so far
};

// `host_wait`: the guard of its host waits on the stream (metrics, host copies; cuda/host_wait.h): the
// communicator's when the stream waits on collectives, none otherwise.
std::unique_ptr<CudaModelOps> make_cuda_model_ops(const CudaModelOptions& options, HostWaitGuard host_wait = {});

}  // namespace zero::model
