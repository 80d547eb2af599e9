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

std::vector<const float*> EngineParamAccess::acquire(int g) {
  const GroupView& view = engine_.gather(g);
  std::vector<const float*> out;
  if (engine_.config().param_dtype == DType::F32) {
    for (const TensorView& t : view) out.push_back(t.as<float>());
    return out;
  }
  auto& scratch = param_scratch_[g];
  scratch.resize(view.size());
  for (size_t t = 0; t < view.size(); ++t) {
    scratch[t].resize(view[t].numel);
    const bf16* src = view[t].as<bf16>();
    for (size_t i = 0; i < view[t].numel; ++i) scratch[t][i] = static_cast<float>(src[i]);
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
  if (engine_.config().param_dtype == DType::F32) {
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
  if (engine_.config().param_dtype != DType::F32) {
    const GroupView& view = grad_views_[g];
    for (size_t t = 0; t < view.size(); ++t) {
      bf16* dst = view[t].as<bf16>();
      for (size_t i = 0; i < view[t].numel; ++i) dst[i] = bf16(grad_scratch_[g][t][i]);
    }
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

void run_empty_micro_step(Engine& engine) {
  const int G = int(engine.groups().size());
  for (int g = 0; g < G; ++g) {
    engine.gather(g);
    engine.release(g);
  }
  engine.begin_backward();
  for (int g = G - 1; g >= 0; --g) {
    engine.gather(g);
    for (const TensorView& t : engine.grad_view(g)) std::memset(t.data, 0, t.numel * dtype_size(t.dtype));
    engine.grad_ready(g);
    engine.release(g);
  }
}

}  // namespace zero::pmtrain
