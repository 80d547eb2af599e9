// zero.world_invariant's metric sums: the loss, chosen-reward and rejected-reward sums of a step (or of an
// evaluation) added micro-batch by micro-batch in the order of the world-invariant cut (MicroBatchPlan::index),
// so the logged metrics are the same bits at any world size, as the weights are. Each micro-batch's own sums
// are already the same bits (the same pairs in the same order); only the adding up across micro-batches and
// ranks depended on the world. The counts (pairs, correct, tokens) are integers, exact in any order. A step
// under a training mix carries each set's sums too (model::PairStats::groups), added the same way.
//
//   OrderedSums o(slots, sets);    // slots: at least the cut's micro-batch count, the same on every rank
//   o.put(mb.index, its_stats);    // each micro-batch this rank ran
//   all-reduce (sum) o.slots()     // one writer a slot, zeros from the others: exact
//   o.loss_sum() ... o.loss_sum(set)  // added in slot order
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "model/model_ops.h"

namespace zero::pmtrain {

class OrderedSums {
 public:
  static constexpr size_t kPerSums = 3;  // loss, chosen, rejected
  // A slot holds the total's three sums, then each of `groups` sets' three.
  explicit OrderedSums(size_t slots, size_t groups = 0) : per_slot_(kPerSums * (1 + groups)), v_(slots * per_slot_, 0.0) {}
  void put(int64_t index, const model::PairStats& s) {
    ZERO_CHECK(index >= 0 && size_t(index) < v_.size() / per_slot_, "metric slot {} outside the {} of the cut", index,
               v_.size() / per_slot_);
    ZERO_CHECK(kPerSums * (1 + s.groups.size()) == per_slot_, "a micro-batch's sums of {} sets in slots of {}",
               s.groups.size(), per_slot_ / kPerSums - 1);
    double* slot = &v_[size_t(index) * per_slot_];
    write(slot, s);
    for (size_t g = 0; g < s.groups.size(); ++g) write(slot + kPerSums * (1 + g), s.groups[g]);
  }
  std::vector<double>& slots() { return v_; }
  // The total's sums (group -1), or set `group`'s.
  double loss_sum(int64_t group = -1) const { return total(0, group); }
  double chosen_sum(int64_t group = -1) const { return total(1, group); }
  double rejected_sum(int64_t group = -1) const { return total(2, group); }

 private:
  static void write(double* at, const model::PairStats& s) {
    at[0] = s.loss_sum, at[1] = s.chosen_reward_sum, at[2] = s.rejected_reward_sum;
  }
  double total(size_t field, int64_t group) const {
    double t = 0;
    for (size_t i = kPerSums * size_t(group + 1) + field; i < v_.size(); i += per_slot_) t += v_[i];
    return t;
  }
  size_t per_slot_;
  std::vector<double> v_;
};

}  // namespace zero::pmtrain
