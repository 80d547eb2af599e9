#include "cuda/device_allocator.h"

#include <cstring>

#include "core/check.h"
#include "cuda/check.h"

namespace zero {
namespace {

class DeviceAllocator final : public RawAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the (non-sticky) error
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      int dev = -1;
      cudaGetDevice(&dev);
      throw Error(fmt::format("device {} out of memory: cudaMalloc of {} bytes failed with {} of {} bytes free; "
                              "use a higher zero stage, a smaller micro-batch or activation checkpointing "
                              "(`pmtrain plan` estimates the peak)", dev, bytes, free_b, total_b));
    }
    CUDA_CHECK(rc);
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
  }
  void deallocate(void* p) override { CUDA_WARN(cudaFree(p)); }  // called from destructors: never throws
};

class PinnedHostAllocator final : public RawAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    std::memset(p, 0, bytes);
    return p;
  }
  void deallocate(void* p) override { CUDA_WARN(cudaFreeHost(p)); }
};

}  // namespace

std::unique_ptr<RawAllocator> make_pinned_host_allocator() { return std::make_unique<PinnedHostAllocator>(); }

std::unique_ptr<RawAllocator> make_device_allocator() { return std::make_unique<DeviceAllocator>(); }

}  // namespace zero
