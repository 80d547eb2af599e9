#include "model/cuda/device_params.h"

#include <cuda_runtime_api.h>

#include "core/check.h"
#include "cuda/check.h"

namespace zero::model {

struct DeviceParams::Region {
  void* p = nullptr;
  explicit Region(size_t bytes) {
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 1));
  }
  ~Region() { cudaFree(p); }
};

DeviceParams::DeviceParams(const DenseParams& host, DType dtype, bool with_grads) : groups_(host.groups()), dtype_(dtype) {
  ZERO_REQUIRE(dtype == DType::F32 || dtype == DType::BF16, ConfigError,
               "device parameters are fp32 or bf16, not {}", dtype_name(dtype));
  const size_t es = dtype_size(dtype);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int64_t n = groups_[g].numel();
    params_.push_back(std::make_unique<Region>(es * size_t(n)));
    if (with_grads) grads_.push_back(std::make_unique<Region>(es * size_t(n)));
    offsets_.emplace_back();
    int64_t at = 0;
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
      offsets_[g].push_back(at);
      const std::span<const float> p = host.param(int(g), int(t));
      char* dst = static_cast<char*>(params_[g]->p) + es * size_t(at);
      if (dtype == DType::F32) {
        CUDA_CHECK(cudaMemcpy(dst, p.data(), p.size_bytes(), cudaMemcpyHostToDevice));
      } else {
        std::vector<bf16> b(p.begin(), p.end());  // Eigen::bfloat16(float): round to nearest even
        CUDA_CHECK(cudaMemcpy(dst, b.data(), b.size() * sizeof(bf16), cudaMemcpyHostToDevice));
      }
      at += int64_t(p.size());
    }
  }
}

DeviceParams::~DeviceParams() = default;

std::vector<TensorRef> DeviceParams::views(int g, void* base) const {
  ZERO_CHECK(g >= 0 && size_t(g) < groups_.size(), "group {} of {}", g, groups_.size());
  std::vector<TensorRef> v;
  for (size_t t = 0; t < groups_[g].tensors.size(); ++t)
    v.emplace_back(static_cast<char*>(base) + dtype_size(dtype_) * size_t(offsets_[g][t]), dtype_,
                   groups_[g].tensors[t].shape);
  return v;
}

std::vector<TensorRef> DeviceParams::acquire(int g) { return views(g, params_.at(size_t(g))->p); }
std::vector<TensorRef> DeviceParams::grad_buffers(int g) {
  ZERO_CHECK(!grads_.empty(), "DeviceParams made without gradient buffers (forward only)");
  return views(g, grads_.at(size_t(g))->p);
}

std::vector<float> DeviceParams::download(const Region& r, int g, int t) const {
  const size_t n = size_t(groups_.at(size_t(g)).tensors.at(size_t(t)).numel());
  const char* src = static_cast<const char*>(r.p) + dtype_size(dtype_) * size_t(offsets_[g][t]);
  CUDA_CHECK(cudaDeviceSynchronize());  // the model's work on any stream is done
  std::vector<float> out(n);
  if (dtype_ == DType::F32) {
    CUDA_CHECK(cudaMemcpy(out.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost));
  } else {
    std::vector<bf16> b(n);
    CUDA_CHECK(cudaMemcpy(b.data(), src, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) out[i] = float(b[i]);
  }
  return out;
}

std::vector<float> DeviceParams::param(int g, int t) const { return download(*params_.at(size_t(g)), g, t); }
std::vector<float> DeviceParams::grad(int g, int t) const {
  ZERO_CHECK(!grads_.empty(), "DeviceParams made without gradient buffers (forward only)");
  return download(*grads_.at(size_t(g)), g, t);
}

}  // namespace zero::model
