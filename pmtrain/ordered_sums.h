// zero.world_invariant's metric sums: the loss, chosen-reward and rejected-reward sums of a step (or of an
// evaluation) added micro-batch by micro-batch in the order of the world-invariant cut (MicroBatchPlan::index),
// so the logged metrics are the same bits at any world size, as the weights are. Each micro-batch's own sums
// are already the same bits (the same pairs in the same order); only the adding up across micro-batches and
// ranks depended on the world. The counts (pairs, correct, tokens) are integers, exact in any order.
//
//   OrderedSums o(slots);          // slots: at least the cut's micro-batch count, the same on every rank
//   o.put(mb.index, its_stats);    // each micro-batch this rank ran
//   all-reduce (sum) o.slots()     // one writer a slot, zeros from the others: exact
//   o.loss_sum() ...               // added in slot order
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "model/model_ops.h"

namespace zero::pmtrain {

class OrderedSums {
 public:
  static constexpr size_t kPerSlot = 3;  // loss, chosen, rejected
  explicit OrderedSums(size_t slots) : v_(slots * kPerSlot, 0.0) {}
  void put(int64_t index, const model::PairStats& s) {
    ZERO_CHECK(index >= 0 && size_t(index) < v_.size() / kPerSlot, "metric slot {} outside the {} of the cut", index,
               v_.size() / kPerSlot);
    double* slot = &v_[size_t(index) * kPerSlot];
    slot[0] = s.loss_sum, slot[1] = s.chosen_reward_sum, slot[2] = s.rejected_reward_sum;
  }
  std::vector<double>& slots() { return v_; }
  double loss_sum() const { return total(0); }
  double chosen_sum() const { return total(1); }
  double rejected_sum() const { return total(2); }

 private:
  double total(size_t field) const {
    double t = 0;
    for (size_t i = field; i < v_.size(); i += kPerSlot) t += v_[i];
    return t;
  }
  std::vector<double> v_;
};

}  // namespace zero::pmtrain
