// The per-element formulas of FlashAttention-2's backward pass: the probability recomputed from the
// row's log-sum-exp kept by forward (no T x T matrix is stored), and the softmax gradient
// ds = p * (dp - D), where D = rowsum(dO * O) = sum_j p_j dp_j is computed once per row before the
// tile loop. Shared by the CPU emulation of the tiled attention and the CUDA kernels.
#pragma once
#include <cmath>

#include "core/math/hd.h"

namespace zero::math {

// p = exp(score - lse): score is the scaled score, as forward saw it; a masked score of -inf gives 0.
ZERO_HD float softmax_prob_from_lse(float score, float lse) { return expf(score - lse); }

// Gradient of the loss w.r.t. one score through its row's softmax, given dp = dL/dp for that element
// and row_dot = D = sum_j p_j dp_j of the row. p = 0 (masked) gives 0.
ZERO_HD float softmax_grad(float p, float dp, float row_dot) { return p * (dp - row_dot); }

}  // namespace zero::math
