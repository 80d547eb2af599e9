// Helpers for the CUDA backend's tests: skipping without a device, a tiny device buffer, and the
// one-time device setup of an MPI test process (device from the node-local rank; NCCL_HOSTID per rank
// when ranks share a GPU). Tests only: no error recovery beyond failing the test.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/check.h"
#include "cuda/device_select.h"

namespace zero::testing {

// ZERO_REQUIRE_GPU=1 (launch/gpu_check.sh on the GPU machine): a missing device fails the test instead
// of skipping it, so a GPU run cannot pass by skipping.
inline bool gpu_required() {
  const char* v = std::getenv("ZERO_REQUIRE_GPU");
  return v && *v && std::strcmp(v, "0") != 0;
}
// Skips (or, when a GPU is required, fails) the current test with a reason.
#define ZERO_GPU_SKIP(why)                                                     \
  do {                                                                         \
    if (::zero::testing::gpu_required()) FAIL() << why << " (ZERO_REQUIRE_GPU)"; \
    GTEST_SKIP() << why;                                                       \
  } while (0)

// Skips the test (every rank alike under MPI) when no CUDA device can be used.
#define ZERO_SKIP_WITHOUT_CUDA()                                       \
  do {                                                                 \
    if (::zero::cuda_device_count() == 0) ZERO_GPU_SKIP("no CUDA device"); \
  } while (0)

// Under MPI: skip unless every rank sees a device (so all ranks skip or none does).
inline bool all_ranks_have_cuda() {
  int mine = cuda_device_count() > 0 ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}
#define ZERO_SKIP_WITHOUT_CUDA_ALL_RANKS()                                              \
  do {                                                                                  \
    if (!::zero::testing::all_ranks_have_cuda()) ZERO_GPU_SKIP("no CUDA device on some rank"); \
  } while (0)

// Picks this rank's device once per process and, when ranks of the node share a GPU, gives each
// rank its own NCCL host id (before any NCCL call). Returns the choice.
inline const DeviceChoice& setup_mpi_device() {
  static const DeviceChoice choice = [] {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    DeviceChoice c = select_device(MPI_COMM_WORLD);
    if (c.shared) isolate_ranks_for_shared_gpu(c, rank);
    return c;
  }();
  return choice;
}

// A device allocation for tests (raw bytes), with host round trips.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    CUDA_CHECK(cudaMalloc(&p_, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemset(p_, 0, bytes ? bytes : 1));
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  template <class T> T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  template <class T> void upload(const std::vector<T>& h) {
    CUDA_CHECK(cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <class T> std::vector<T> download(size_t count) const {
    std::vector<T> h(count);
    CUDA_CHECK(cudaMemcpy(h.data(), p_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

template <class T> std::vector<T> download(const void* dev, size_t count) {
  std::vector<T> h(count);
  if (count) CUDA_CHECK(cudaMemcpy(h.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
template <class T> void upload(void* dev, const T* host, size_t count) {
  if (count) CUDA_CHECK(cudaMemcpy(dev, host, count * sizeof(T), cudaMemcpyHostToDevice));
}

}  // namespace zero::testing
