// The bridge between a model (model::ParamAccess, typed views) and the engine (zero::Engine, views in the
// compute dtype, in the backend's memory), shaped by the model's group specs. Views of host-addressable
// memory are handed over as they are (no copy, fp32 or bf16: the CPU model's ops widen and round); a
// backend the host cannot address goes through fp32 host scratch with the backend's copies on acquire,
// and gradients back on grad_ready.
#pragma once
#include <vector>

#include "model/param_access.h"
#include "zero/engine.h"

namespace zero::pmtrain {

class EngineParamAccess final : public model::ParamAccess {
 public:
  // groups: the model's group specs, the ones the engine was built from (engine_groups).
  EngineParamAccess(Engine& engine, std::vector<model::GroupSpec> groups);
  std::vector<model::TensorRef> acquire(int g) override;
  void release(int g) override;
  void begin_backward() override { engine_.begin_backward(); }
  std::vector<model::TensorRef> grad_buffers(int g) override;
  void grad_ready(int g) override;

 private:
  bool staged() const;
  // The engine's view as the model's typed views: in place, or (staged) fp32 copies in scratch[g].
  std::vector<model::TensorRef> shaped(const GroupView& view, int g, bool copy_in,
                                       std::vector<std::vector<std::vector<float>>>& scratch);

  Engine& engine_;
  std::vector<model::GroupSpec> groups_;
  std::vector<std::vector<std::vector<float>>> param_scratch_, grad_scratch_;  // [group][tensor], staged only
  std::vector<GroupView> grad_views_;
};

// Engine group declarations from the model's group specs (names, sizes, weight-decay flags).
std::vector<GroupInfo> engine_groups(const std::vector<model::GroupSpec>& groups);

// A micro-step with no pairs (a rank whose share of the step is empty): the collectives of a real one,
// zero gradients, so every rank issues the same sequence of collectives.
void run_empty_micro_step(Engine& engine);

}  // namespace zero::pmtrain
