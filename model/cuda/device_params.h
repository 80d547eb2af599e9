// DeviceParams: every parameter group whole in device memory (fp32 or bf16), with a gradient buffer of the
// same dtype, as a ParamAccess for the model on CudaModelOps outside the engine: `pmtrain score` on
// backend cuda and the HF parity driver (tests/cuda/hf_parity_driver.cpp). Filled once from a host
// DenseParams (bf16: rounded to nearest even, as the engine's fp32 -> bf16 cast does); never split into
// pieces (a single process holds everything anyway). The engine's own runs use EngineParamAccess.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/param_access.h"

namespace zero::model {

class DeviceParams final : public ParamAccess {
 public:
  // with_grads false (scoring: forward only): no gradient buffers; grad_buffers() then throws.
  DeviceParams(const DenseParams& host, DType dtype, bool with_grads = true);
  ~DeviceParams() override;
  DeviceParams(const DeviceParams&) = delete;
  DeviceParams& operator=(const DeviceParams&) = delete;

  DType dtype() const { return dtype_; }
  const std::vector<GroupSpec>& groups() const { return groups_; }
  // Tensor t of group g (GroupSpec order), widened to fp32 on the host.
  std::vector<float> param(int g, int t) const;
  std::vector<float> grad(int g, int t) const;

  std::vector<TensorRef> acquire(int g) override;
  void release(int) override {}
  void begin_backward() override {}
  std::vector<TensorRef> grad_buffers(int g) override;
  void grad_ready(int) override {}

 private:
  struct Region;  // one device allocation
  std::vector<TensorRef> views(int g, void* base) const;
  std::vector<float> download(const Region& r, int g, int t) const;

  std::vector<GroupSpec> groups_;
  DType dtype_;
  std::vector<std::vector<int64_t>> offsets_;  // [group][tensor]: first element in the group's region
  std::vector<std::unique_ptr<Region>> params_, grads_;
};

}  // namespace zero::model
