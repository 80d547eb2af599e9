// The pairwise reward-model loss on host memory: softplus(r_rejected - r_chosen) = -logsigmoid(r_c - r_r),
// summed over real pairs (pair_mask == 1), with its gradient and the metrics a trainer logs.
#pragma once
#include <cstdint>
#include <span>

#include "model/model_ops.h"

namespace zero::model::cpu {

// log(1 + exp(z)) without overflow or the cancellation that makes the naive form return 0 for z << 0.
double softplus(double z);

// rewards: [2P], sequence 2i chosen and 2i+1 rejected of pair i; pair_mask: [P].
// drewards (optional, [2P]): d loss_sum / d reward, 0 for masked pairs.
PairStats pair_loss(std::span<const float> rewards, std::span<const uint8_t> pair_mask, std::span<float> drewards = {});

}  // namespace zero::model::cpu
