// The bridge between a model (model::ParamAccess, fp32 pointers) and the engine (zero::Engine, views in
// the compute dtype). fp32 views are handed over as they are (no copy); bf16 views are widened into
// fp32 scratch on acquire and gradients narrowed back on grad_ready.
#pragma once
#include <vector>

#include "model/param_access.h"
#include "zero/engine.h"

namespace zero::pmtrain {

class EngineParamAccess final : public model::ParamAccess {
 public:
  explicit EngineParamAccess(Engine& engine);
  std::vector<const float*> acquire(int g) override;
  void release(int g) override;
  void begin_backward() override { engine_.begin_backward(); }
  std::vector<float*> grad_buffers(int g) override;
  void grad_ready(int g) override;

 private:
  Engine& engine_;
  std::vector<std::vector<std::vector<float>>> param_scratch_, grad_scratch_;  // [group][tensor], bf16 only
  std::vector<GroupView> grad_views_;
};

// Engine group declarations from the model's group specs (names, sizes, weight-decay flags).
std::vector<GroupInfo> engine_groups(const std::vector<model::GroupSpec>& groups);

// A micro-step with no pairs (a rank whose share of the step is empty): the collectives of a real one,
// zero gradients, so every rank issues the same sequence of collectives.
void run_empty_micro_step(Engine& engine);

}  // namespace zero::pmtrain
