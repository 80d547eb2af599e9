// The compute backend of a run (`backend: cpu | cuda`), assembled in one place for training and evaluation:
// the engine's DeviceOps and allocator, the communicator the engine reduces over, and the model's ops on the
// same device (the CUDA backend: CudaOps, NcclCommunicator and CudaModelOps on one compute stream, the
// device chosen by node-local rank).
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/memory.h"
#include "model/model_ops.h"
#include "model/param_access.h"
#include "pmtrain/config.h"
#include "zero/device_ops.h"

namespace zero::pmtrain {

struct BackendParts {
  std::unique_ptr<DeviceOps> ops;
  std::unique_ptr<TrackingAllocator> alloc;
  std::unique_ptr<Communicator> engine_comm;  // null: the run's own communicator (MPI)
  std::unique_ptr<model::ModelOps> model_ops;  // null: the model's default (the CPU's)
  bool model_reads_backend_memory = false;     // the model's ops take the engine's views in place
  std::string description;                     // for the log
};

// Whether this build has the CUDA backend.
bool cuda_backend_built();

// Throws ConfigError (one line) when cfg.backend cannot run in this process: cuda in a build without it, or
// without a visible GPU. Cheap (no device is initialised beyond counting): call it before reading data.
void require_backend_here(const Config& cfg, int rank);

// `comm`: the run's communicator over MPI_COMM_WORLD. Throws as require_backend_here does.
BackendParts make_backend(const Config& cfg, Communicator& comm);

// `pmtrain score` (one process, no MPI, no engine): the model's ops and where they read the weights.
struct ScoringBackend {
  std::unique_ptr<model::ModelOps> model_ops;  // null: the model's default (the CPU's)
  std::unique_ptr<model::ParamAccess> params;  // null: the host weights themselves; cuda: a device copy
  std::string description;                     // for the log
};
ScoringBackend make_scoring_backend(const Config& cfg, const model::DenseParams& host);

// Bytes in use on this process's GPU as the driver reports them (cudaMemGetInfo: total - free, so the CUDA
// context, cuBLASLt workspaces, NCCL and the activation pool's cached blocks included, and on a shared GPU
// the other processes' too); 0 on the CPU backend.
size_t device_bytes_in_use(const Config& cfg);

// Whether an error is the device running out of memory (the model's activations or an engine buffer).
bool is_out_of_memory(const std::exception& e);

}  // namespace zero::pmtrain
