// FlashAttention-2-style causal GQA attention kernels over variable-length sequences (cu_seqlens, each minus
// its hidden span if it has one: a shared-prompt pair, core/math/attention_mask.h), fp32
// or bf16 storage, fp32 math. They transcribe model/attention_tiled.h (the CPU emulation, which is their
// specification: the same 64 x 64 tiles, loop order, online softmax and two-level tile sums), so the
// emulation's comment describes what runs here. Differences, both numerically invisible:
//   - dQ comes from its own kernel (one thread block per (sequence, head, query block), key blocks
//     ascending, recomputing S and dP), not from the ordered counter: dQ is summed in the emulation's
//     order (0 + partial(kb = 0) + partial(kb = 1) + ...) in registers, and no thread block ever waits
//     for another, so forward progress needs no assumption about the order blocks are scheduled in.
//   - The backward workspace holds only D = rowsum(dO * O) (fp32, one per (token, head)).
// Two implementations of that loop nest (Path):
//   - Fma (attention_fma_kernels.cuh): fp32 FMA loops over shared-memory tiles, any head_dim 1-128, fp32 or
//     bf16 storage; in fp32 it computes the emulation's sums in the emulation's order (<= 1e-6 of it).
//   - Mma (attention_mma_kernels.cuh): bf16 storage, head_dim 64 or 128 (Qwen3's 128), the tile products on tensor
//     cores (mma.sync m16n8k16, fp32 accumulation, the softmax in fp32 registers, P and dS rounded to
//     bf16 as the products' inputs, as FlashAttention-2 does): the production path. Same tiles, grid and
//     loop order as Fma; its sums run in the instruction's order, so it matches the exact attention
//     within bf16's bound, not the emulation bit for bit. Deterministic: no atomics, fixed order.
//   - MmaWide: Mma in FlashAttention-2's shapes: the forward at 32 query rows a warp (128-row blocks), dK/dV in
//     8-warp blocks of 128 keys (S^T and dP^T from 32 x 32 warp tiles, P^T and dS^T through shared memory,
//     each warp adding 32 keys x half the head's columns); each fragment loaded feeds more products, and every
//     element is summed as Mma sums it: the same bits. dQ is Mma's. Not yet timed on a GPU, so Auto keeps Mma;
//     pmtrain's model.attention flash_wide takes it where Mma applies (CudaModelOps), so a run can time it.
// Auto takes Mma where it applies (bf16, head_dim 64/128, 16-byte aligned tensors), else Fma.
// Index arithmetic (grid mapping, loop bounds, shared-memory layouts): attention_grid.h; the
// tensor-core register layout: mma_fragments.h.
// Contract: every sequence's length <= max_seqlen and cu_seqlens[num_seqs] == num_tokens; a kernel that
// finds otherwise prints the sequence and traps (the host cannot read device cu_seqlens without a sync).
#pragma once
#include <cuda_runtime_api.h>
#include <cstddef>
#include <cstdint>
#include "model/attention.h"
namespace zero::model::cuda_attention {
enum class Elem : int { F32 = 0, BF16 = 1 };  // q, k, v, o, d_o, dq, dk, dv share it; lse is always fp32
enum class Path : int { Auto = 0, Fma = 1, Mma = 2, MmaWide = 3 };
// Whether the tensor-core path takes this element type and shape (Path::Mma throws ConfigError otherwise).
bool mma_supported(Elem t, const AttentionShape& s);
struct VarlenBatch {
  const int32_t* cu_seqlens = nullptr;  // device, num_seqs + 1 offsets
  int32_t num_seqs = 0;
  int32_t max_seqlen = 0;
  int64_t num_tokens = 0;               // cu_seqlens[num_seqs]
  // device, 2 per sequence: its hidden span (begin, end; core/math/attention_mask.h), or null for none
  const int32_t* hidden = nullptr;
};
// o [N, heads*d], lse [N, heads] fp32. Scale 1/sqrt(d). v (and backward's dv) may be a column view of a
// wider row (the fused q/k/v projection and its gradient): v_stride (dv_stride) elements from one token's
// row to the next (0: packed).
// Throws zero::ConfigError for an unsupported shape (heads not a multiple of kv_heads, head_dim outside
// [1, 128]), batch or path, before anything is launched. lse is the same quantity on both paths (the
// natural log-sum-exp of the scaled scores), so a backward may take another path than its forward.
void forward(const void* q, const void* k, const void* v, Elem t, const AttentionShape& s, const VarlenBatch& b,
             void* o, float* lse, cudaStream_t stream, Path path = Path::Auto, int64_t v_stride = 0);
// Device scratch the backward needs for this batch (D = rowsum(dO*O), fp32, one per (token, head); the
// separate dQ kernel needs no fp32 dQ accumulator and no ordering counters), rounded up to 256 bytes.
size_t backward_workspace_bytes(const AttentionShape& s, const VarlenBatch& b);
// dq, dk, dv overwritten. workspace: backward_workspace_bytes(s, b) bytes of device memory, 256-byte aligned.
void backward(const void* q, const void* k, const void* v, const void* o, const void* d_o, const float* lse, Elem t,
              const AttentionShape& s, const VarlenBatch& b, void* dq, void* dk, void* dv, void* workspace,
              size_t workspace_bytes, cudaStream_t stream, Path path = Path::Auto, int64_t v_stride = 0,
              int64_t dv_stride = 0);
}  // namespace zero::model::cuda_attention
