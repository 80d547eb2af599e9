// How the model reaches its parameters group by group (the engine contract, without the engine), and
// DenseParams: plain full fp32 host storage of every parameter and gradient for one process.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/tensor_ref.h"

namespace zero::model {

struct TensorSpec {
  std::string name;            // HF state-dict name, e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // row-major, torch order ([out, in] for a linear weight)
  bool weight_decay = true;
  int64_t numel() const;
};

struct GroupSpec {
  std::string name;  // "embed", "layer.3", "head"
  std::vector<TensorSpec> tensors;
  int64_t numel() const;
};

// How the model reaches its parameters group by group (the engine contract, without the engine).
// Per micro-batch: forward calls acquire(g)/release(g) for g = 0..G-1 in order; then begin_backward();
// backward, for g = G-1..0: acquire(g) (again; under activation checkpointing the recompute uses it too),
// grad_buffers(g) -> the model OVERWRITES them with this micro-batch's gradient of the SUM of its pair losses,
// grad_ready(g), release(g).
// Views are typed (fp32 or bf16, in the memory of the model's ops backend), one per tensor of the group in
// GroupSpec order and shape; the model widens and rounds inside its ops, so no copy is made here.
class ParamAccess {
 public:
  virtual ~ParamAccess() = default;
  virtual std::vector<TensorRef> acquire(int g) = 0;  // the group's parameters, valid until release(g)
  virtual void release(int g) = 0;
  virtual void begin_backward() = 0;
  virtual std::vector<TensorRef> grad_buffers(int g) = 0;  // zero-or-garbage; the model overwrites them fully
  virtual void grad_ready(int g) = 0;
};

// Plain full fp32 storage (single process, tests, `pmtrain score`): owns params and grads per tensor.
// Parameters start at zero, gradients at zero. It checks the call protocol (acquire before release,
// grad_buffers only after begin_backward and while the group is acquired) and throws InternalError
// on a violation, so a model that breaks the contract fails here before it fails in the engine.
class DenseParams final : public ParamAccess {
 public:
  explicit DenseParams(std::vector<GroupSpec> groups);

  const std::vector<GroupSpec>& groups() const { return groups_; }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  int64_t numel() const;  // all parameters

  // By group g and tensor t (GroupSpec order).
  std::span<float> param(int g, int t);
  std::span<const float> param(int g, int t) const;
  std::span<float> grad(int g, int t);
  std::span<const float> grad(int g, int t) const;

  // By HF name; throws InputError naming the tensor when absent.
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const TensorSpec& spec(const std::string& name) const;
  std::pair<int, int> locate(const std::string& name) const;  // (group, tensor)
  std::span<float> param(const std::string& name);
  std::span<const float> param(const std::string& name) const;
  std::span<float> grad(const std::string& name);
  std::span<const float> grad(const std::string& name) const;

  // ParamAccess
  std::vector<TensorRef> acquire(int g) override;
  void release(int g) override;
  void begin_backward() override;
  std::vector<TensorRef> grad_buffers(int g) override;
  void grad_ready(int g) override;

 private:
  void check_group(int g) const;
  std::vector<TensorRef> views(int g, std::vector<std::vector<float>>& storage) const;

  std::vector<GroupSpec> groups_;
  std::vector<std::vector<std::vector<float>>> params_;  // [group][tensor][numel]
  std::vector<std::vector<std::vector<float>>> grads_;   // [group][tensor][numel]
  std::unordered_map<std::string, std::pair<int, int>> index_;
  std::vector<uint8_t> acquired_;  // per group
  bool in_backward_ = false;
};

}  // namespace zero::model
