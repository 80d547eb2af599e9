// The launchers of attention_kernels.cu and attention_mma.cu, called by attention_kernels.cpp once it has checked the
// arguments (that file owns validation and sizes; this one only launches). Plain types: nvcc compiles
// the .cu without fmt or the project's check macros.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace zero::model::cuda_attention::detail {

// One launch's geometry, already validated (head_dim in [1, 128], heads % kv_heads == 0,
// num_seqs, max_seqlen, num_tokens > 0, every grid within 2^31 - 1 blocks).
struct Geometry {
  const int32_t* cu_seqlens = nullptr;
  const int32_t* hidden = nullptr;  // 2 per sequence, or null
  int64_t num_seqs = 0, max_seqlen = 0, num_tokens = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  int64_t v_stride = 0, dv_stride = 0;  // elements between v's (dv's) token rows; 0: kv_heads * head_dim (packed)
  bool bf16 = false;
  bool mma = false;  // the tensor-core kernels (attention_mma.cu): bf16, head_dim 64 or 128, 16-byte aligned
  bool wide = false;  // with mma: the wide forward and dK/dV (Path::MmaWide)
};

void launch_forward(const Geometry& g, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream);
// row_dot: [num_tokens * heads] fp32 scratch (D).
void launch_backward(const Geometry& g, const void* q, const void* k, const void* v, const void* o, const void* d_o,
                     const float* lse, float* row_dot, void* dq, void* dk, void* dv, cudaStream_t stream);

// attention_mma.cu: the tensor-core forward, and the dK/dV and dQ kernels after D is in row_dot.
void launch_forward_mma(const Geometry& g, const void* q, const void* k, const void* v, void* o, float* lse,
                        cudaStream_t stream);
void launch_dkdv_dq_mma(const Geometry& g, const void* q, const void* k, const void* v, const void* d_o,
                        const float* lse, const float* row_dot, void* dq, void* dk, void* dv, cudaStream_t stream);

// Opts `kernel` into `bytes` of dynamic shared memory (past the default 48 KiB), after checking the device
// gives a block that much (a clear error, not a failed launch).
void opt_in_shared_memory(const void* kernel, int bytes);

}  // namespace zero::model::cuda_attention::detail
