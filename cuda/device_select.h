// Which GPU this rank uses: the node-local rank modulo the node's device count. Also the one switch
// that lets several ranks share one GPU under NCCL (tests on a one-GPU machine). Never throws from
// the probes, so callers can skip cleanly without a device.
#pragma once

namespace zero {

// Devices the CUDA runtime sees; 0 when there are none or the driver cannot be queried.
int cuda_device_count();

struct DeviceChoice {
  int device = -1;
  int device_count = 0;
  bool shared = false;  // more ranks on this node than devices: some ranks share a GPU
};

// Picks local_rank % device_count, makes it current (cudaSetDevice) and says whether the node's
// ranks must share devices. Throws zero::Error when there is no device.
DeviceChoice select_device(int local_rank, int local_world);

// NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"). Giving each rank its own
// NCCL host id (NCCL_HOSTID=fakehost<rank>) makes NCCL treat them as separate hosts (network
// transport between them): correct, slow, for tests and debugging only. Must run before the first
// NCCL call of the process. Overwrites NCCL_HOSTID.
void isolate_ranks_for_shared_gpu(int rank);

}  // namespace zero
