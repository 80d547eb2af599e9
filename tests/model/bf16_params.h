// bf16 parameter storage for the model tests, handed out as bf16 views as the engine does at
// zero.param_dtype bf16 (gradients in bf16 too, garbage before each backward), and a bf16 value's bits.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "model/param_access.h"

namespace zero::model::testing {

inline uint16_t bits(bf16 v) {
  uint16_t b;
  std::memcpy(&b, &v, 2);
  return b;
}

class Bf16Params final : public ParamAccess {
 public:
  explicit Bf16Params(const DenseParams& src) : groups_(src.groups()) {
    for (int g = 0; g < src.num_groups(); ++g) {
      params_.emplace_back();
      grads_.emplace_back();
      for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
        std::vector<bf16> v;
        for (float x : src.param(g, int(t))) v.push_back(bf16(x));
        grads_[g].emplace_back(v.size());
        params_[g].push_back(std::move(v));
      }
    }
  }
  std::vector<TensorRef> acquire(int g) override { return views(g, params_); }
  void release(int) override {}
  void begin_backward() override {}
  std::vector<TensorRef> grad_buffers(int g) override {
    for (auto& t : grads_[g]) std::fill(t.begin(), t.end(), bf16(12345.0f));  // the model must overwrite all
    return views(g, grads_);
  }
  void grad_ready(int) override {}

  std::vector<std::vector<std::vector<bf16>>> params_, grads_;  // [group][tensor][element]

 private:
  std::vector<TensorRef> views(int g, std::vector<std::vector<std::vector<bf16>>>& s) const {
    std::vector<TensorRef> out;
    for (size_t t = 0; t < s[g].size(); ++t) out.emplace_back(s[g][t].data(), DType::BF16, groups_[g].tensors[t].shape);
    return out;
  }
  std::vector<GroupSpec> groups_;
};

}  // namespace zero::model::testing
