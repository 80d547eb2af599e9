// The bridge between a model (model::ParamAccess, fp32 host pointers) and the engine (zero::Engine, views
// in the compute dtype, in the backend's memory). fp32 views of host memory are handed over as they are
// (no copy); bf16 views, or a backend the host cannot address, go through fp32 host scratch with the
// backend's copies on acquire, and gradients back on grad_ready.
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
  bool staged() const;
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
