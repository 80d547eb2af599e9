// One rank's GPU as pmtrain finds it before any data is read (the CUDA module's probe_devices,
// cuda_backend_module.h), for the planner to check the GPU memory plan against (planner.h).
#pragma once
#include <cstddef>
#include <string>

namespace zero::pmtrain {

struct DeviceMemory {
  int rank = 0;
  int device = -1;          // the index this rank uses among the devices it sees
  int ranks_on_device = 1;  // node-local ranks on that GPU (by UUID), this one included
  size_t free_bytes = 0;    // cudaMemGetInfo after this rank's CUDA context was made
  size_t total_bytes = 0;
  std::string name;         // cudaDeviceProp::name
};

}  // namespace zero::pmtrain
