#include "pmtrain/train_step.h"

namespace zero::pmtrain {

StepResult train_step(Engine& engine, const model::Qwen3RewardModel& model, model::ParamAccess& access,
                      size_t micro_steps, const std::function<std::optional<data::PairBatch>(size_t)>& micro_batch,
                      int64_t global_real_pairs, PairStats& local, std::vector<model::PairStats>* each) {
  engine.set_accum_steps(int(micro_steps));  // fixed by pairs, or varying by token budget
  int64_t tokens = 0, answer_tokens = 0;
  for (size_t i = 0; i < micro_steps; ++i) {
    engine.begin_micro_step();
    const std::optional<data::PairBatch> batch = micro_batch(i);
    if (!batch) {
      engine.empty_micro_step();
      continue;
    }
    tokens += model.queue_forward_backward(*batch, access);
    answer_tokens += batch->answer_tokens();
  }
  // The step's one wait for the model's metrics: the micro-batches above queued without reading back.
  std::vector<model::PairStats> per_batch = model.ops().take_pair_stats_each();
  local.add(PairStats::of(model::PairStats::sum(per_batch), tokens, answer_tokens));
  if (each) *each = std::move(per_batch);
  // The gradients are of summed pair losses; dividing by every rank's real pairs gives the mean's.
  return engine.step(double(global_real_pairs));
}

}  // namespace zero::pmtrain
