// The pairwise reward-model loss on host memory (core/math/pair_loss_math.h: the formula, margin and
// centering), summed over real pairs (mask == 1), with its gradient and the metrics a trainer logs.
#pragma once
#include <span>

#include "model/model_ops.h"

namespace zero::model::cpu {

// rewards: [2P], sequence 2i chosen and 2i+1 rejected of pair i; in.mask: [P].
// drewards (optional, [2P]): d loss_sum / d reward, 0 for masked pairs.
PairStats pair_loss(std::span<const float> rewards, const PairLossInputs& in, std::span<float> drewards = {});

}  // namespace zero::model::cpu
