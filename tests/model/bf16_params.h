// bf16 parameter storage for the model tests, handed out as bf16 views as the engine does at
// zero.param_dtype bf16 (gradients in bf16 too, garbage before each backward), and a bf16 value's bits.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "model/param_access.h"

namespace zero::model::testing {

inline uint16_t bits(bf16 v) {
  uint16_t b;
  std::memcpy(&b, &v, 2);
  return b;
}

// Each group one flat bf16 buffer, its tensors back to back in GroupSpec order, as the engine hands them out
// (so the layer fuses gate and up exactly as on the engine's views).
class Bf16Params final : public ParamAccess {
 public:
  explicit Bf16Params(const DenseParams& src) : groups_(src.groups()) {
    for (int g = 0; g < src.num_groups(); ++g) {
      offsets_.emplace_back();
      params_.emplace_back(), grads_.emplace_back();
      for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
        offsets_[g].push_back(params_[g].size());
        for (float x : src.param(g, int(t))) params_[g].push_back(bf16(x));
      }
      grads_[g].resize(params_[g].size());
    }
  }
  std::vector<TensorRef> acquire(int g) override { return views(g, params_); }
  void release(int) override {}
  void begin_backward() override {}
  std::vector<TensorRef> grad_buffers(int g) override {
    std::fill(grads_[g].begin(), grads_[g].end(), bf16(12345.0f));  // the model must overwrite all
    return views(g, grads_);
  }
  void grad_ready(int) override {}

  std::span<bf16> param(int g, size_t t) { return span(g, t, params_); }
  std::span<bf16> grad(int g, size_t t) { return span(g, t, grads_); }

 private:
  std::span<bf16> span(int g, size_t t, std::vector<std::vector<bf16>>& s) {
    const size_t n = size_t(groups_[g].tensors[t].numel());
    return {s[g].data() + offsets_[g][t], n};
  }
  std::vector<TensorRef> views(int g, std::vector<std::vector<bf16>>& s) const {
    std::vector<TensorRef> out;
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t)
      out.emplace_back(s[g].data() + offsets_[g][t], DType::BF16, groups_[g].tensors[t].shape);
    return out;
  }
  std::vector<GroupSpec> groups_;
  std::vector<std::vector<size_t>> offsets_;           // [group][tensor]
  std::vector<std::vector<bf16>> params_, grads_;      // [group][flat element]
};

}  // namespace zero::model::testing
