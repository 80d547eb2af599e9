// The MLP training loop from an arbitrary step, for resumed runs: optimizer steps first_step+1 ..
// last_step with exactly the sample order and arithmetic of train_with_engine (mlp_training.h), whose
// data order is a pure function of the step, so a run resumed at step s continues bit for bit.
#pragma once
#include <functional>

#include "examples/mlp/mlp_training.h"

namespace zero::example {

// Runs steps first_step .. last_step - 1 (0-based; StepLog::step is 1-based) and calls on_step after each.
void train_from_step(const MlpModel& model, Engine& engine, const MlpDataset& data, int64_t global_batch,
                     int64_t micro, int first_step, int last_step, const std::function<void(const StepLog&)>& on_step);

}  // namespace zero::example
