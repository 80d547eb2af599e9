// Rotary position embedding, HF rotate_half form: pairs (i, i + d/2), inv_freq = 1/theta^(2i/d),
// cos/sin in fp32 per token position. Applied in place to a [head_dim, heads*tokens] buffer whose
// column t*heads + h is head h of token t (the memory of a [tokens, heads*head_dim] tensor).
#pragma once
#include <cstdint>
#include <span>

#include "model/cpu/eigen_views.h"

namespace zero::model::cpu {

struct RopeTable {
  int64_t head_dim = 0;
  Mat cos;  // [head_dim/2, tokens]
  Mat sin;  // [head_dim/2, tokens]
};

RopeTable make_rope_table(std::span<const int32_t> positions, int64_t head_dim, double theta);

// x <- x*cos + rotate_half(x)*sin, rotate_half(x) = cat(-x[d/2:], x[:d/2]). Tokens are independent: on up to
// `threads` threads (parallel.h), the same bits at any count.
void rope_forward(float* x, int64_t heads, const RopeTable& t, int threads = 1);
// dx <- the transpose rotation (rotation by -angle), the gradient of rope_forward.
void rope_backward(float* dx, int64_t heads, const RopeTable& t, int threads = 1);

}  // namespace zero::model::cpu
