// The online-softmax update of FlashAttention-2, one query row at a time: a running maximum m and a
// running sum l of exp(s - m) over the key blocks seen so far. A new block first rescales (m, l) and
// the row's output accumulator to the new maximum, then adds its own exp(s - m). After the last block
// the output is acc / l and the log-sum-exp m + log(l) is what backward needs. Shared by the CPU
// emulation of the tiled attention and the CUDA kernels.
#pragma once
#include <cmath>

#include "core/math/hd.h"

namespace zero::math {

struct SoftmaxRow {
  float m = -INFINITY;  // running max of the scores seen (scaled)
  float l = 0.0f;       // running sum of exp(score - m)
};

// Moves the row to max(m, block_max); returns the factor the output accumulator must be multiplied by
// (0 for the first block, so an uninitialised accumulator is never read as a value).
ZERO_HD float online_softmax_rescale(SoftmaxRow& r, float block_max) {
  const float m_new = fmaxf(r.m, block_max);
  const float alpha = r.m == -INFINITY ? 0.0f : expf(r.m - m_new);
  r.l *= alpha;
  r.m = m_new;
  return alpha;
}

// exp(score - m) for one score after the rescale; adds it to the running sum and returns it.
ZERO_HD float online_softmax_accept(SoftmaxRow& r, float score) {
  const float p = expf(score - r.m);
  r.l += p;
  return p;
}

// The row's log-sum-exp once every block is in (what the backward pass recomputes probabilities from).
ZERO_HD float online_softmax_lse(const SoftmaxRow& r) { return r.m + logf(r.l); }

}  // namespace zero::math
