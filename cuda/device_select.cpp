#include "cuda/device_select.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/check.h"
#include "comm/mpi_check.h"
#include "cuda/check.h"
#include "cuda/device_sharing.h"

namespace zero {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear: "no driver" / "no device" are answers here, not errors
    return 0;
  }
  return n;
}

std::string device_uuid(int device) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : p.uuid.bytes) out += {hex[b >> 4], hex[b & 15]};
  return out;
}

DeviceChoice select_device(MPI_Comm comm) {
  int rank = 0, local_rank = 0, local_world = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &local_rank));
  MPI_CHECK(MPI_Comm_size(node, &local_world));
  int world = 1;
  MPI_CHECK(MPI_Comm_size(comm, &world));
  DeviceChoice c;
  c.device_count = cuda_device_count();
  ZERO_REQUIRE(c.device_count > 0, Error,
               "no CUDA device is visible to local rank {} (check CUDA_VISIBLE_DEVICES and the driver), or run "
               "the CPU backend", local_rank);
  c.device = device_for_local_rank(local_rank, c.device_count);
  CUDA_CHECK(cudaSetDevice(c.device));
  c.uuid = device_uuid(c.device);
  std::vector<char> all(size_t(local_world) * 32);
  MPI_CHECK(MPI_Allgather(c.uuid.data(), 32, MPI_CHAR, all.data(), 32, MPI_CHAR, node));
  MPI_CHECK(MPI_Comm_free(&node));
  std::vector<std::string> uuids;
  for (int r = 0; r < local_world; ++r) uuids.emplace_back(all.data() + size_t(r) * 32, 32);
  c.shared = any_gpu_shared(uuids);
  c.ranks_on_device = ranks_on_same_gpu(uuids, local_rank);
  c.one_node = local_world == world;
  return c;
}

void isolate_ranks_for_shared_gpu(const DeviceChoice& dev, int rank) {
  const std::string id = "fakehost" + std::to_string(rank);
  setenv("NCCL_HOSTID", id.c_str(), /*overwrite=*/1);
  if (dev.one_node) {
    setenv("NCCL_SOCKET_IFNAME", "lo", /*overwrite=*/0);
    setenv("NCCL_IB_DISABLE", "1", /*overwrite=*/0);
  }
}

}  // namespace zero
