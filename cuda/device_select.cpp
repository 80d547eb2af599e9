#include "cuda/device_select.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "core/check.h"
#include "cuda/check.h"

namespace zero {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear: "no driver" / "no device" are answers here, not errors
    return 0;
  }
  return n;
}

DeviceChoice select_device(int local_rank, int local_world) {
  DeviceChoice c;
  c.device_count = cuda_device_count();
  ZERO_REQUIRE(c.device_count > 0, Error,
               "no CUDA device is visible to local rank {} (check CUDA_VISIBLE_DEVICES and the driver), or run "
               "the CPU backend", local_rank);
  ZERO_CHECK(local_rank >= 0 && local_world > 0, "select_device: local rank {} of {}", local_rank, local_world);
  c.device = local_rank % c.device_count;
  c.shared = local_world > c.device_count;
  CUDA_CHECK(cudaSetDevice(c.device));
  return c;
}

void isolate_ranks_for_shared_gpu(int rank) {
  const std::string id = "fakehost" + std::to_string(rank);
  setenv("NCCL_HOSTID", id.c_str(), /*overwrite=*/1);
}

}  // namespace zero
