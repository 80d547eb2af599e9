// The training loops for the MLP: through the engine (any stage, any world size) and a plain
// single-process full-batch reference that uses no engine at all (what the engine must reproduce).
#pragma once
#include <functional>
#include <vector>

#include "examples/mlp/mlp_model.h"

namespace zero::example {

struct StepLog {
  int64_t step = 0;
  double loss = 0;  // mean over the global batch
  StepResult result;
};

// Sample order, identical for every world size: optimizer step s uses global samples
// (s * G + j) mod N, j < G; rank r's micro-step i takes j in [(i * W + r) * m, (i * W + r + 1) * m).
std::vector<StepLog> train_with_engine(const MlpModel& model, Engine& engine, const MlpDataset& data,
                                       int64_t global_batch, int64_t micro, int steps,
                                       const std::function<void(const StepLog&)>& on_step = {});

// The same loop from any step: optimizer steps first_step .. last_step - 1 (0-based; StepLog::step is
// 1-based). The data order is a pure function of the step, so a run resumed at step s continues bit
// for bit.
void train_from_step(const MlpModel& model, Engine& engine, const MlpDataset& data, int64_t global_batch,
                     int64_t micro, int first_step, int last_step, const std::function<void(const StepLog&)>& on_step);

// The reference: full batch of G samples in one pass, full fp32 params, AdamW and clipping as torch.
struct ReferenceRun {
  DenseMlpParams params;
  std::vector<double> losses, grad_norms;
};
ReferenceRun train_reference(const MlpModel& model, const MlpDataset& data, int64_t global_batch, int steps,
                             const optim::AdamWConfig& adamw, const optim::LrSchedule& schedule, float clip_norm);

// Flattened real parameters in group/tensor order.
std::vector<float> flatten(const DenseMlpParams& p);
std::vector<float> full_parameters(Engine& engine);  // collective

}  // namespace zero::example
