// The reference (eager) attention of the CPU backend: scores materialised per sequence and head, softmax,
// Eigen GEMMs. Backward recomputes the probabilities from q and k with the same code, so they are the
// forward's bit for bit and nothing of size len^2 is kept between the passes.
#pragma once
#include <cstdint>
#include <span>

#include "model/attention.h"

namespace zero::model::cpu {

// Token-major buffers over n tokens: q, o [n, heads*d]; k, v [n, kv_heads*d]; lse [n, heads] (the
// log-sum-exp of each query's scaled scores). Sequence s is tokens [cu_seqlens[s], cu_seqlens[s + 1]); hidden
// (2 entries a sequence, or empty for none) its hidden span (core/math/attention_mask.h). Forward is
// spread over `threads` threads a (sequence, head) at a time, backward a (sequence, kv head) at a time
// (its q heads in order): the same bits at any thread count (parallel.h).
void attention_reference_forward(const float* q, const float* k, const float* v, const AttentionShape& s,
                                 std::span<const int32_t> cu_seqlens, std::span<const int32_t> hidden, int64_t n,
                                 float* o, float* lse, int threads = 1);

// d_o [n, heads*d] -> dq [n, heads*d], dk, dv [n, kv_heads*d] (all overwritten).
void attention_reference_backward(const float* q, const float* k, const float* v, const float* d_o,
                                  const AttentionShape& s, std::span<const int32_t> cu_seqlens,
                                  std::span<const int32_t> hidden, int64_t n, float* dq, float* dk, float* dv,
                                  int threads = 1);

}  // namespace zero::model::cpu
