// The pairwise reward-model objective, one definition for the CPU model and the CUDA kernel, in fp64 (the
// values near convergence are ~1e-8). Per real pair, with r_c the chosen and r_r the rejected reward:
//
//   loss = softplus(r_r - r_c + margin) + center * (r_c + r_r)^2
//        = -logsigmoid(r_c - r_r - margin) + center * (r_c + r_r)^2
//
// margin: the pair's required reward gap (Llama 2's preference margin; TRL's "margin" column), 0 without one.
// center: reward centering (Eisenstein et al. 2023; TRL's center_rewards_coefficient): pulls the rewards'
// mean to 0 so they are comparable across runs. Summed over real pairs, the step divides the sum by the
// global real-pair count, which makes the centering term center x mean((r_c + r_r)^2), as TRL writes it.
// With margin 0 and center 0 every value is bit for bit the plain softplus(r_r - r_c) and +-sigmoid.
#pragma once
#include <cstdint>

#include "core/math/activations.h"
#include "core/math/hd.h"
#include "core/math/rounding.h"

namespace zero::math {

struct PairLossTerm {
  double loss;
  double d_chosen;    // d loss / d r_c
  double d_rejected;  // d loss / d r_r
};

ZERO_HD PairLossTerm pair_loss_term(double rc, double rr, double margin, double center) {
  const double z = add_rn(sub_rn(rr, rc), margin);
  const double sg = sigmoid(z);  // d softplus(z) / dz
  if (center == 0.0) return {softplus(z), -sg, sg};
  const double sum = add_rn(rc, rr);
  const double dc = mul_rn(mul_rn(2.0, center), sum);  // d center (r_c + r_r)^2 / d r, either reward
  return {add_rn(softplus(z), mul_rn(center, mul_rn(sum, sum))), sub_rn(dc, sg), add_rn(sg, dc)};
}

// The sums a trainer logs, over real pairs only.
struct PairLossSums {
  double loss_sum = 0, chosen_sum = 0, rejected_sum = 0;
  long long real_pairs = 0;
  long long correct_pairs = 0;  // r_c > r_r (ties count as wrong; the margin does not enter)
};

// One real pair's terms added to a sum (pair order is the adding order).
ZERO_HD void add_pair(PairLossSums& s, double loss, double rc, double rr) {
  s.loss_sum = add_rn(s.loss_sum, loss);
  s.real_pairs += 1;
  s.correct_pairs += rc > rr ? 1 : 0;
  s.chosen_sum = add_rn(s.chosen_sum, rc);
  s.rejected_sum = add_rn(s.rejected_sum, rr);
}

// rewards [2P]: sequence 2i chosen, 2i + 1 rejected of pair i; mask [P] (1 = real pair); margin [P] or
// null (0 for every pair); drewards [2P] or null: d loss_sum / d reward, 0 for masked pairs. Pairs in order,
// so both sides add the same numbers in the same order.
// group [P] or null: pair i's group, 0 <= group[i] < groups (pmtrain: its training set); group_sums[g] then
// gets the sums of group g's real pairs alone (in pair order), beside the total, which groups leave as is.
ZERO_HD PairLossSums pair_losses(const float* rewards, const uint8_t* mask, const float* margin, int64_t pairs,
                                 double center, float* drewards, const int32_t* group = nullptr,
                                 PairLossSums* group_sums = nullptr, int32_t groups = 0) {
  PairLossSums s;
  for (int32_t g = 0; g < groups; ++g) group_sums[g] = PairLossSums{};
  for (int64_t i = 0; i < pairs; ++i) {
    const double rc = rewards[2 * i], rr = rewards[2 * i + 1];
    const bool real = mask[i] != 0;
    const PairLossTerm t = pair_loss_term(rc, rr, margin ? double(margin[i]) : 0.0, center);
    if (drewards) {
      drewards[2 * i] = real ? float(t.d_chosen) : 0.0f;
      drewards[2 * i + 1] = real ? float(t.d_rejected) : 0.0f;
    }
    if (!real) continue;
    add_pair(s, t.loss, rc, rr);
    if (group) add_pair(group_sums[group[i]], t.loss, rc, rr);
  }
  return s;
}

}  // namespace zero::math
