// ActivationPool: size classes, free lists, and the one retry after releasing the cache.
#include "model/cuda/activation_pool.h"

#include <cuda_runtime_api.h>

#include "cuda/check.h"

namespace zero::model::cuda_pool {

size_t block_bytes(size_t bytes) {
  constexpr size_t kSmallStep = 512, kLargeStep = size_t(2) << 20, kSmallLimit = size_t(1) << 20;
  if (bytes == 0) return kSmallStep;
  const size_t step = bytes <= kSmallLimit ? kSmallStep : kLargeStep;
  return (bytes + step - 1) / step * step;
}

ActivationPool::~ActivationPool() {
  release_cached();
  for (auto& [p, size] : live_) CUDA_WARN(cudaFree(p));  // leaked activations: still give the memory back
}

void* ActivationPool::alloc(size_t bytes) {
  const size_t size = block_bytes(bytes);
  void* p = nullptr;
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    cudaError_t rc = cudaMalloc(&p, size);
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the sticky-free error before retrying
      release_cached();
      rc = cudaMalloc(&p, size);
    }
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw OutOfMemory(fmt::format("GPU out of memory: an activation of {} bytes did not fit ({} bytes held by the "
                                    "model's activations, peak {}; {} of {} bytes free on the device)",
                                    size, stats_.held_bytes, stats_.peak_in_use_bytes, free_b, total_b));
    }
    CUDA_CHECK(rc);
    ++stats_.device_mallocs;
    stats_.held_bytes += size;
  }
  live_.emplace(p, size);
  stats_.in_use_bytes += size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return p;
}

void ActivationPool::free(void* p) {
  if (!p) return;
  auto it = live_.find(p);
  ZERO_CHECK(it != live_.end(), "activation pool: freeing {} which it did not hand out", p);
  stats_.in_use_bytes -= it->second;
  free_[it->second].push_back(p);
  live_.erase(it);
}

void ActivationPool::release_cached() {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      CUDA_WARN(cudaFree(p));
      stats_.held_bytes -= size;
    }
  }
  free_.clear();
}

}  // namespace zero::model::cuda_pool
