// What CudaModelOps uploads once per micro-batch (begin_batch): the token plan's device-side arrays and the
// RoPE tables, packed into one host staging buffer and copied in one transfer into one device buffer that is
// reused (grown only when too small). Host-only layout, checked by CPU tests.
#pragma once
#include <cstddef>
#include <cstdint>

namespace zero::model::cuda_batch {

// Byte offsets into the buffer, each 256-byte aligned; total: the bytes to allocate and copy.
struct BatchLayout {
  size_t tokens = 0;      // int32 [N] token ids (embedding forward)
  size_t cu_seqlens = 0;  // int32 [A + 1] attention sequences (TokenPlan::cu_seqlens)
  size_t hidden = 0;      // int32 [2 A] their hidden spans (none: no bytes)
  size_t pooled = 0;      // int32 [S] pooled token of each answer (the head)
  size_t by_id = 0;       // int32 [N] token indices sorted by id (embedding backward)
  size_t ids = 0;         // int32 [U] distinct ids
  size_t id_start = 0;    // int32 [U + 1]
  size_t cos = 0;         // fp32 [N, head_dim / 2]
  size_t sin = 0;         // fp32 [N, head_dim / 2]
  size_t total = 0;
};

constexpr size_t kAlign = 256;

inline BatchLayout batch_layout(int64_t tokens, int64_t seqs, int64_t attention_seqs, bool hidden,
                                int64_t distinct_ids, int64_t head_dim) {
  BatchLayout l;
  size_t at = 0;
  auto take = [&at](size_t& field, size_t bytes) {
    field = at;
    at += (bytes + kAlign - 1) / kAlign * kAlign;
  };
  const size_t i32 = sizeof(int32_t), f32 = sizeof(float), half = size_t(head_dim / 2);
  take(l.tokens, i32 * size_t(tokens));
  take(l.cu_seqlens, i32 * size_t(attention_seqs + 1));
  take(l.hidden, hidden ? i32 * size_t(2 * attention_seqs) : 0);
  take(l.pooled, i32 * size_t(seqs));
  take(l.by_id, i32 * size_t(tokens));
  take(l.ids, i32 * size_t(distinct_ids));
  take(l.id_start, i32 * size_t(distinct_ids + 1));
  take(l.cos, f32 * size_t(tokens) * half);
  take(l.sin, f32 * size_t(tokens) * half);
  l.total = at;
  return l;
}

}  // namespace zero::model::cuda_batch
