#include "pmtrain/engine_params.h"

#include <cstring>

#include "core/check.h"

namespace zero::pmtrain {

EngineParamAccess::EngineParamAccess(Engine& engine) : engine_(engine) {
  const size_t G = engine.groups().size();
  param_scratch_.resize(G);
  grad_scratch_.resize(G);
  grad_views_.resize(G);
}

// The model reads fp32 host memory: views are handed over as they are when the engine's memory is
// that already; otherwise they are staged through the backend's host copies (widening bf16).
bool EngineParamAccess::staged() const {
  return engine_.config().param_dtype != DType::F32 || !engine_.ops().host_addressable();
}

std::vector<const float*> EngineParamAccess::acquire(int g) {
  const GroupView& view = engine_.gather(g);
  std::vector<const float*> out;
  if (!staged()) {
    for (const TensorView& t : view) out.push_back(t.as<float>());
    return out;
  }
  auto& scratch = param_scratch_[g];
  scratch.resize(view.size());
  for (size_t t = 0; t < view.size(); ++t) {
    scratch[t].resize(view[t].numel);
    engine_.ops().copy_to_host(scratch[t].data(), view[t].data, view[t].dtype, view[t].numel);
    out.push_back(scratch[t].data());
  }
  return out;
}

void EngineParamAccess::release(int g) {
  param_scratch_[g].clear();
  engine_.release(g);
}

std::vector<float*> EngineParamAccess::grad_buffers(int g) {
  const GroupView& view = engine_.grad_view(g);
  grad_views_[g] = view;
  std::vector<float*> out;
  if (!staged()) {
    for (const TensorView& t : view) out.push_back(t.as<float>());
    return out;
  }
  auto& scratch = grad_scratch_[g];
  scratch.resize(view.size());
  for (size_t t = 0; t < view.size(); ++t) {
    scratch[t].resize(view[t].numel);
    out.push_back(scratch[t].data());
  }
  return out;
}

void EngineParamAccess::grad_ready(int g) {
  if (staged()) {
    const GroupView& view = grad_views_[g];
    for (size_t t = 0; t < view.size(); ++t)
      engine_.ops().copy_from_host(view[t].data, view[t].dtype, grad_scratch_[g][t].data(), view[t].numel);
    grad_scratch_[g].clear();
  }
  engine_.grad_ready(g);
}

std::vector<GroupInfo> engine_groups(const std::vector<model::GroupSpec>& groups) {
  std::vector<GroupInfo> out;
  for (const auto& g : groups) {
    GroupInfo gi{g.name, {}};
    for (const auto& t : g.tensors) gi.tensors.push_back({t.name, size_t(t.numel()), t.weight_decay});
    out.push_back(std::move(gi));
  }
  return out;
}

void run_empty_micro_step(Engine& engine) { engine.empty_micro_step(); }

}  // namespace zero::pmtrain
