// EngineParamAccess: the engine's views, shaped by the model's group specs.
#include "pmtrain/engine_params.h"

#include <cstring>

#include "core/check.h"

namespace zero::pmtrain {

EngineParamAccess::EngineParamAccess(Engine& engine, std::vector<model::GroupSpec> groups,
                                     bool model_reads_backend_memory)
    : engine_(engine), groups_(std::move(groups)), in_place_(model_reads_backend_memory) {
  ZERO_CHECK(groups_.size() == engine.groups().size(), "{} model groups for {} engine groups", groups_.size(),
             engine.groups().size());
  param_scratch_.resize(groups_.size());
  grad_scratch_.resize(groups_.size());
  grad_views_.resize(groups_.size());
  grad_pieces_.resize(groups_.size());
}

// The model's ops read host memory (the CPU backend) or the engine's own (the CUDA model ops): the engine's
// views are handed over as they are when the model can read them, in either dtype; otherwise they are staged
// through the backend's host copies.
bool EngineParamAccess::staged() const { return !in_place_ && !engine_.ops().host_addressable(); }

std::vector<model::TensorRef> EngineParamAccess::shaped(const GroupView& view, int g, bool copy_in,
                                                        std::vector<std::vector<std::vector<float>>>& scratch) {
  const model::GroupSpec& spec = groups_[g];
  ZERO_CHECK(view.size() == spec.tensors.size(), "group {}: the engine has {} tensors, the model {}", g, view.size(),
             spec.tensors.size());
  std::vector<model::TensorRef> out;
  if (staged()) scratch[g].resize(view.size());
  for (size_t t = 0; t < view.size(); ++t) {
    const model::TensorSpec& ts = spec.tensors[t];
    ZERO_CHECK(int64_t(view[t].numel) == ts.numel(), "{}: the engine holds {} elements, the model {}", ts.name,
               view[t].numel, ts.numel());
    if (!staged()) {
      out.emplace_back(view[t].data, view[t].dtype, ts.shape);
      continue;
    }
    std::vector<float>& host = scratch[g][t];
    host.resize(view[t].numel);
    if (copy_in) engine_.ops().copy_to_host(host.data(), view[t].data, view[t].dtype, view[t].numel);
    out.emplace_back(host.data(), DType::F32, ts.shape);
  }
  return out;
}

std::vector<model::TensorRef> EngineParamAccess::acquire(int g) {
  return shaped(engine_.gather(g), g, true, param_scratch_);
}

void EngineParamAccess::release(int g) {
  param_scratch_[g].clear();
  engine_.release(g);
}

std::vector<model::TensorRef> EngineParamAccess::grad_buffers(int g) {
  grad_views_[g] = engine_.grad_view(g);
  return shaped(grad_views_[g], g, false, grad_scratch_);
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

model::Piece EngineParamAccess::as_piece(const PieceView& view, int g, bool copy_in,
                                         std::vector<std::vector<std::vector<float>>>& scratch) {
  model::Piece out{staged() ? DType::F32 : view.dtype, {}};
  if (staged()) scratch[g].resize(view.runs.size());
  for (size_t i = 0; i < view.runs.size(); ++i) {
    const FlatRun& r = view.runs[i];
    void* data = r.data;
    if (staged()) {
      std::vector<float>& host = scratch[g][i];
      host.resize(r.count);
      if (copy_in) engine_.ops().copy_to_host(host.data(), r.data, view.dtype, r.count);
      data = host.data();
    }
    out.runs.push_back({int64_t(r.begin), int64_t(r.count), data});
  }
  return out;
}

model::Piece EngineParamAccess::acquire_piece(int g, int k) {
  return as_piece(engine_.gather_piece(g, k), g, true, param_scratch_);
}

void EngineParamAccess::release_piece(int g, int k) {
  param_scratch_[g].clear();
  engine_.release_piece(g, k);
}

model::Piece EngineParamAccess::grad_piece(int g, int k) {
  grad_pieces_[g] = engine_.grad_piece(g, k);
  return as_piece(grad_pieces_[g], g, false, grad_scratch_);
}

void EngineParamAccess::piece_ready(int g, int k) {
  if (staged()) {
    const PieceView& view = grad_pieces_[g];
    for (size_t i = 0; i < view.runs.size(); ++i)
      engine_.ops().copy_from_host(view.runs[i].data, view.dtype, grad_scratch_[g][i].data(), view.runs[i].count);
    grad_scratch_[g].clear();
  }
  engine_.piece_ready(g, k);
}

std::vector<GroupInfo> engine_groups(const std::vector<model::GroupSpec>& groups) {
  std::vector<GroupInfo> out;
  for (const auto& g : groups) {
    GroupInfo gi{g.name, {}, g.splittable};
    for (const auto& t : g.tensors) gi.tensors.push_back({t.name, size_t(t.numel()), t.weight_decay});
    out.push_back(std::move(gi));
  }
  return out;
}

}  // namespace zero::pmtrain
