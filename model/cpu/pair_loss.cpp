// The pair loss over host spans: the shared per-pair loop, in double.
#include "model/cpu/pair_loss.h"

#include <vector>

#include "core/check.h"
#include "core/math/pair_loss_math.h"

namespace zero::model::cpu {

PairStats pair_loss(std::span<const float> rewards, const PairLossInputs& in, std::span<float> drewards) {
  const size_t P = in.mask.size();
  ZERO_CHECK(rewards.size() == 2 * P, "{} rewards for {} pairs", rewards.size(), P);
  ZERO_CHECK(in.margin.empty() || in.margin.size() == P, "{} margins for {} pairs", in.margin.size(), P);
  ZERO_CHECK(in.group.empty() || in.group.size() == P, "{} group ids for {} pairs", in.group.size(), P);
  ZERO_CHECK(drewards.empty() || drewards.size() == rewards.size(), "drewards has {} entries, want {}",
             drewards.size(), rewards.size());
  // [total, group 0, ...]: the layout the CUDA kernel writes too.
  std::vector<math::PairLossSums> s(1 + size_t(in.groups));
  s[0] = math::pair_losses(rewards.data(), in.mask.data(), in.margin.empty() ? nullptr : in.margin.data(), int64_t(P),
                           in.center, drewards.empty() ? nullptr : drewards.data(),
                           in.group.empty() ? nullptr : in.group.data(), s.data() + 1, in.groups);
  return PairStats::of_groups(s.data(), in.groups);
}

}  // namespace zero::model::cpu
