// Which node-local ranks share a GPU, decided by device identity (UUID), not by counts: under Slurm's
// --gpus-per-task (or a per-task CUDA_VISIBLE_DEVICES) every task sees one device, numbered 0, and they
// are all different GPUs; with all GPUs visible, ranks pick local_rank % count. Comparing counts
// (local ranks > visible devices) calls the first case "shared" and sends NCCL over sockets. Host-only
// arithmetic, so it is tested without a GPU.
#pragma once
#include <string>
#include <vector>

namespace zero {

// The device index a node-local rank uses among the devices it sees.
int device_for_local_rank(int local_rank, int visible_devices);

// Given each node-local rank's device UUID (index = local rank), whether any GPU serves two ranks.
bool any_gpu_shared(const std::vector<std::string>& uuid_by_local_rank);
// How many node-local ranks use the GPU of `local_rank` (itself included): the ranks whose memory plans
// that device must hold together.
int ranks_on_same_gpu(const std::vector<std::string>& uuid_by_local_rank, int local_rank);

}  // namespace zero
