// One optimizer step as pmtrain runs it, apart from where its micro-batches come from: each micro-batch
// through the model on the engine (an absent one runs the collectives with zero gradients, so every rank
// issues the same sequence), then the engine's step divided by the global real-pair count, so the update
// is that of the mean pair loss over the whole global batch. The Trainer and the fixture test share it.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "data/batch.h"
#include "model/reward_model.h"
#include "pmtrain/metrics.h"
#include "zero/engine.h"

namespace zero::pmtrain {

// micro_batch(i) for i < micro_steps gives this rank's i-th micro-batch, or nullopt when it has none.
// Returns the engine's step result; `local` gets this rank's pair statistics added, and `each` (if given)
// the model's statistics of every micro-batch that had one, in order.
StepResult train_step(Engine& engine, const model::Qwen3RewardModel& model, model::ParamAccess& access,
                      size_t micro_steps, const std::function<std::optional<data::PairBatch>(size_t)>& micro_batch,
                      int64_t global_real_pairs, PairStats& local, std::vector<model::PairStats>* each = nullptr);

}  // namespace zero::pmtrain
