// FlashAttention-2 forward/backward on the GPU (causal, GQA, varlen over cu_seqlens), the kernels
// CudaModelOps' attention calls. The tile loop is model/attention_tiled.cpp's (its CPU emulation), the
// per-element formulas core/math/online_softmax.h and softmax_backward.h.
#pragma once
#include <cuda_runtime_api.h>
#include <cstddef>
#include <cstdint>
#include "model/attention.h"
namespace zero::model::cuda_attention {
enum class Elem : int { F32 = 0, BF16 = 1 };  // q, k, v, o, d_o, dq, dk, dv share it; lse is always fp32
struct VarlenBatch {
  const int32_t* cu_seqlens = nullptr;  // device, num_seqs + 1 offsets
  int32_t num_seqs = 0;
  int32_t max_seqlen = 0;
  int64_t num_tokens = 0;               // cu_seqlens[num_seqs]
};
// o [N, heads*d], lse [N, heads] fp32. Scale 1/sqrt(d).
void forward(const void* q, const void* k, const void* v, Elem t, const AttentionShape& s, const VarlenBatch& b,
             void* o, float* lse, cudaStream_t stream);
// Device scratch the backward needs for this batch (D = rowsum(dO*O), fp32 dQ accumulator, ordering counters).
size_t backward_workspace_bytes(const AttentionShape& s, const VarlenBatch& b);
// dq, dk, dv overwritten. workspace: backward_workspace_bytes(s, b) bytes of device memory, 256-byte aligned.
void backward(const void* q, const void* k, const void* v, const void* o, const void* d_o, const float* lse, Elem t,
              const AttentionShape& s, const VarlenBatch& b, void* dq, void* dk, void* dv, void* workspace,
              size_t workspace_bytes, cudaStream_t stream);
}  // namespace zero::model::cuda_attention
