// EngineParamAccess: the engine's views, shaped by the model's group specs.
#include "pmtrain/engine_params.h"

#include <cstring>

#include "core/check.h"

namespace zero::pmtrain {

EngineParamAccess::EngineParamAccess(Engine& engine, std::vector<model::GroupSpec> groups)
    : engine_(engine), groups_(std::move(groups)) {
  ZERO_CHECK(groups_.size() == engine.groups().size(), "{} model groups for {} engine groups", groups_.size(),
             engine.groups().size());
}

std::vector<model::TensorRef> EngineParamAccess::shaped(const GroupView& view, int g) const {
  const model::GroupSpec& spec = groups_[g];
  ZERO_CHECK(view.size() == spec.tensors.size(), "group {}: the engine has {} tensors, the model {}", g, view.size(),
             spec.tensors.size());
  std::vector<model::TensorRef> out;
  for (size_t t = 0; t < view.size(); ++t) {
    const model::TensorSpec& ts = spec.tensors[t];
    ZERO_CHECK(int64_t(view[t].numel) == ts.numel(), "{}: the engine holds {} elements, the model {}", ts.name,
               view[t].numel, ts.numel());
    out.emplace_back(view[t].data, view[t].dtype, ts.shape);
  }
  return out;
}

std::vector<model::TensorRef> EngineParamAccess::acquire(int g) { return shaped(engine_.gather(g), g); }

std::vector<model::TensorRef> EngineParamAccess::grad_buffers(int g) { return shaped(engine_.grad_view(g), g); }

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
