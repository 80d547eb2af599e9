// DenseParams: full fp32 parameter and gradient storage with protocol checks.
#include "model/param_access.h"

#include "core/check.h"

namespace zero::model {

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t GroupSpec::numel() const {
  int64_t n = 0;
  for (const TensorSpec& t : tensors) n += t.numel();
  return n;
}

DenseParams::DenseParams(std::vector<GroupSpec> groups) : groups_(std::move(groups)) {
  params_.resize(groups_.size());
  grads_.resize(groups_.size());
  acquired_.assign(groups_.size(), 0);
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
      const TensorSpec& s = groups_[g].tensors[t];
      ZERO_CHECK(s.numel() >= 0, "tensor {} has a negative dimension", s.name);
      params_[g].emplace_back(static_cast<size_t>(s.numel()), 0.0f);
      grads_[g].emplace_back(static_cast<size_t>(s.numel()), 0.0f);
      const bool fresh = index_.emplace(s.name, std::make_pair(int(g), int(t))).second;
      ZERO_CHECK(fresh, "tensor name {} appears twice in the group specs", s.name);
    }
  }
}

int64_t DenseParams::numel() const {
  int64_t n = 0;
  for (const GroupSpec& g : groups_) n += g.numel();
  return n;
}

void DenseParams::check_group(int g) const {
  ZERO_CHECK(g >= 0 && g < num_groups(), "group {} out of range [0, {})", g, num_groups());
}

std::span<float> DenseParams::param(int g, int t) {
  check_group(g);
  return params_[g].at(t);
}
std::span<const float> DenseParams::param(int g, int t) const {
  check_group(g);
  return params_[g].at(t);
}
std::span<float> DenseParams::grad(int g, int t) {
  check_group(g);
  return grads_[g].at(t);
}
std::span<const float> DenseParams::grad(int g, int t) const {
  check_group(g);
  return grads_[g].at(t);
}

std::pair<int, int> DenseParams::locate(const std::string& name) const {
  auto it = index_.find(name);
  ZERO_REQUIRE(it != index_.end(), InputError, "no parameter named '{}' in this model", name);
  return it->second;
}
const TensorSpec& DenseParams::spec(const std::string& name) const {
  auto [g, t] = locate(name);
  return groups_[g].tensors[t];
}
std::span<float> DenseParams::param(const std::string& name) {
  auto [g, t] = locate(name);
  return param(g, t);
}
std::span<const float> DenseParams::param(const std::string& name) const {
  auto [g, t] = locate(name);
  return param(g, t);
}
std::span<float> DenseParams::grad(const std::string& name) {
  auto [g, t] = locate(name);
  return grad(g, t);
}
std::span<const float> DenseParams::grad(const std::string& name) const {
  auto [g, t] = locate(name);
  return grad(g, t);
}

std::vector<TensorRef> DenseParams::acquire(int g) {
  check_group(g);
  ZERO_CHECK(!acquired_[g], "group {} acquired twice without release", g);
  // A forward pass starting at group 0 begins a new micro-batch.
  if (g == 0 && !in_backward_) {
    for (uint8_t a : acquired_) ZERO_CHECK(!a, "group 0 acquired while another group is held");
  }
  acquired_[g] = 1;
  return views(g, params_[g]);
}

void DenseParams::release(int g) {
  check_group(g);
  ZERO_CHECK(acquired_[g], "group {} released without acquire", g);
  acquired_[g] = 0;
  // The backward pass ends when group 0 is released after its gradient.
  if (g == 0 && in_backward_) in_backward_ = false;
}

void DenseParams::begin_backward() { in_backward_ = true; }

std::vector<TensorRef> DenseParams::grad_buffers(int g) {
  check_group(g);
  ZERO_CHECK(in_backward_, "grad_buffers({}) outside backward (begin_backward not called)", g);
  ZERO_CHECK(acquired_[g], "grad_buffers({}) while the group is not acquired", g);
  return views(g, grads_[g]);
}

std::vector<TensorRef> DenseParams::views(int g, std::vector<std::vector<float>>& storage) const {
  std::vector<TensorRef> out;
  for (size_t t = 0; t < storage.size(); ++t) out.emplace_back(storage[t].data(), DType::F32, groups_[g].tensors[t].shape);
  return out;
}

void DenseParams::grad_ready(int g) {
  check_group(g);
  ZERO_CHECK(in_backward_, "grad_ready({}) outside backward", g);
}

}  // namespace zero::model
