// The CUDA model ops' device scratch (model/cuda/cuda_model_ops.cpp takes it from the activation pool for the
// length of one op), as arithmetic on the batch's shape alone. The kernels size their grids and scratch with
// these definitions (model_kernels.cu, attention_kernels.cpp) and the planner adds the largest to the
// activations it plans for a GPU (activation_plan.h gpu_op_scratch_bytes): one definition, so the plan is
// what the kernels take.
#pragma once
#include <cstddef>
#include <cstdint>

namespace zero::model::device_scratch {

// RMSNorm kernels: a row lives in a warp when it has at most 256 elements (8 rows a 256-thread block: q/k-norm's
// head-sized rows), else in the whole block (hidden-sized rows).
constexpr int64_t kNormBlockThreads = 256;
constexpr int64_t kMaxNormBackwardBlocks = 1024;  // backward grids: each block one fp32 partial of dw
constexpr int64_t norm_rows_per_block(int64_t dim) { return dim <= 256 ? kNormBlockThreads / 32 : 1; }
// Blocks for `rows` rows of `dim` elements, at most `cap` (grid-stride beyond), at least 1.
constexpr int64_t norm_blocks(int64_t rows, int64_t dim, int64_t cap) {
  const int64_t g = norm_rows_per_block(dim), n = (rows + g - 1) / g;
  return n < 1 ? 1 : n > cap ? cap : n;
}
// The norm backward's dw partials: one fp32 row of dim per block, summed over the blocks in a fixed order.
constexpr int64_t norm_partial_blocks(int64_t rows, int64_t dim) { return norm_blocks(rows, dim, kMaxNormBackwardBlocks); }
constexpr size_t norm_partials_bytes(int64_t rows, int64_t dim) {
  return sizeof(float) * size_t(norm_partial_blocks(rows, dim) * dim);
}

// The attention backward's workspace: D = rowsum(dO * O), fp32 per (token, head), in 256-byte steps.
constexpr size_t kAttentionWorkspaceAlign = 256;
constexpr size_t attention_workspace_bytes(int64_t tokens, int64_t heads) {
  const size_t row_dot = sizeof(float) * size_t(tokens) * size_t(heads);
  return (row_dot + kAttentionWorkspaceAlign - 1) / kAttentionWorkspaceAlign * kAttentionWorkspaceAlign;
}

// The pooled head's backward: two fp32 rows of hidden per sequence (the norm's and the score's partials).
constexpr size_t pooled_head_partials_bytes(int64_t seqs, int64_t hidden) {
  return sizeof(float) * 2 * size_t(seqs) * size_t(hidden);
}

}  // namespace zero::model::device_scratch
