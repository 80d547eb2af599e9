// Which GPU this rank uses: the node-local rank modulo the devices it sees; whether ranks of the node
// share a GPU is decided by comparing device UUIDs across them (cuda/device_sharing.h). Also the one
// switch that lets several ranks share one GPU under NCCL (tests on a one-GPU machine). Never throws
// from the probes, so callers can skip cleanly without a device.
#pragma once
#include <mpi.h>

#include <string>

namespace zero {

// Devices the CUDA runtime sees; 0 when there are none or the driver cannot be queried.
int cuda_device_count();

struct DeviceChoice {
  int device = -1;
  int device_count = 0;   // devices this rank sees
  std::string uuid;       // of the chosen device
  bool shared = false;    // some GPU of this node serves two of its ranks (same UUID)
  int ranks_on_device = 1;  // node-local ranks on this rank's GPU, itself included
  bool one_node = true;   // every rank of the communicator is on this node
};

// Collective over `comm`: splits it by node, picks local_rank % visible devices, makes it current
// (cudaSetDevice), and all-gathers the device UUIDs over the node's ranks to say whether any GPU is
// shared. Throws zero::Error when there is no device.
DeviceChoice select_device(MPI_Comm comm);
std::string device_uuid(int device);

// NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"). Giving each rank its own
// NCCL host id (NCCL_HOSTID=fakehost<rank>) makes NCCL treat them as separate hosts (network
// transport between them): correct, slow, for tests and debugging only. Must run before the first
// NCCL call of the process. Overwrites NCCL_HOSTID. When the whole job is on this node (dev.one_node)
// the "hosts" talk over loopback sockets: NCCL_SOCKET_IFNAME=lo and NCCL_IB_DISABLE=1 unless the
// environment sets them. Left to NCCL, the fake hosts may pick an InfiniBand card or an interface the
// container cannot reach itself through (a 2-rank test on an H200 machine hung in NCCL's set-up).
void isolate_ranks_for_shared_gpu(const DeviceChoice& dev, int rank);

}  // namespace zero
