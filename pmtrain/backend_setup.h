// The compute backend of a run (`backend: cpu | cuda`), assembled in one place for training and evaluation:
// the engine's DeviceOps and allocator, the communicator the engine reduces over, and the model's ops on the
// same device (backend_parts.h). The CUDA backend (CudaOps, NcclCommunicator and CudaModelOps on one compute
// stream, the device chosen by node-local rank) lives in a module loaded only for `backend: cuda`
// (cuda_backend_loader.h), so the CPU backend maps no CUDA library.
#pragma once
#include <exception>
#include <vector>

#include "model/param_access.h"
#include "pmtrain/backend_parts.h"
#include "pmtrain/config.h"
#include "pmtrain/device_memory.h"

namespace zero::pmtrain {

// The one check that cfg.backend can run in this process. Throws ConfigError (one line, saying what to do
// instead) for cuda when this build has no CUDA backend, its module cannot be loaded, or no GPU is
// visible. Cheap (loads the module, counts devices, initialises none): call it before reading data.
void require_backend_here(const Config& cfg, int rank);

// `comm`: the run's communicator over MPI_COMM_WORLD. Throws as require_backend_here does.
BackendParts make_backend(const Config& cfg, Communicator& comm);

// `pmtrain score`: the model's ops and where they read the weights (cuda: a device copy of `host`).
ScoringBackend make_scoring_backend(const Config& cfg, const model::DenseParams& host);

// Bytes in use on this process's GPU as the driver reports them (cudaMemGetInfo: total - free, so the CUDA
// context, cuBLASLt workspaces, NCCL and the activation pool's cached blocks included, and on a shared GPU
// the other processes' too); 0 on the CPU backend.
size_t device_bytes_in_use(const Config& cfg);

// Collective over MPI_COMM_WORLD (every rank calls it, cuda or not): on the CUDA backend picks each rank's GPU
// as make_backend will and returns every rank's (index = rank: free and total memory, ranks sharing it), for
// the memory check before any data is read; empty on the CPU backend. Throws as require_backend_here does.
std::vector<DeviceMemory> probe_devices(const Config& cfg, int rank);

// Whether an error is the device running out of memory (the model's activations or an engine buffer).
bool is_out_of_memory(const std::exception& e);

}  // namespace zero::pmtrain
