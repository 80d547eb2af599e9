// Stable pairwise logistic loss and its gradient, in double (the values near convergence are ~1e-8).
#include "model/cpu/pair_loss.h"

#include <cmath>

#include "core/check.h"
#include "core/math/activations.h"

namespace zero::model::cpu {

double softplus(double z) { return math::softplus(z); }

PairStats pair_loss(std::span<const float> rewards, std::span<const uint8_t> pair_mask, std::span<float> drewards) {
  const size_t P = pair_mask.size();
  ZERO_CHECK(rewards.size() == 2 * P, "{} rewards for {} pairs", rewards.size(), P);
  ZERO_CHECK(drewards.empty() || drewards.size() == rewards.size(), "drewards has {} entries, want {}",
             drewards.size(), rewards.size());
  PairStats s;
  for (size_t i = 0; i < P; ++i) {
    const double rc = rewards[2 * i], rr = rewards[2 * i + 1];
    const bool real = pair_mask[i] != 0;
    if (!drewards.empty()) {
      // d softplus(rr - rc) = sigmoid(rr - rc) * (d rr - d rc)
      const double sg = real ? math::sigmoid(rr - rc) : 0.0;
      drewards[2 * i] = float(-sg);
      drewards[2 * i + 1] = float(sg);
    }
    if (!real) continue;
    s.loss_sum += softplus(rr - rc);
    s.real_pairs += 1;
    s.correct_pairs += rc > rr ? 1 : 0;
    s.chosen_reward_sum += rc;
    s.rejected_reward_sum += rr;
  }
  return s;
}

}  // namespace zero::model::cpu
