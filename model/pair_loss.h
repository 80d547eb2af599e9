// The pairwise reward-model loss over a batch's pairs: softplus(r_rejected - r_chosen) = -logsigmoid(r_c - r_r),
// summed over real pairs (pair_mask == 1), with its gradient and the metrics a trainer logs.
#pragma once
#include <cstdint>
#include <span>

namespace zero::model {

struct PairStats {
  double loss_sum = 0.0;             // sum over real pairs of softplus(r_rejected - r_chosen)
  int64_t real_pairs = 0;
  int64_t correct_pairs = 0;         // real pairs with r_chosen > r_rejected (ties count as wrong)
  double chosen_reward_sum = 0.0;    // over real pairs
  double rejected_reward_sum = 0.0;  // over real pairs
};

// log(1 + exp(z)) without overflow or the cancellation that makes the naive form return 0 for z << 0.
double softplus(double z);

// rewards: [2P], sequence 2i chosen and 2i+1 rejected of pair i; pair_mask: [P].
// drewards (optional, [2P]): d loss_sum / d reward, 0 for masked pairs.
PairStats pair_loss(std::span<const float> rewards, std::span<const uint8_t> pair_mask, std::span<float> drewards = {});

}  // namespace zero::model
