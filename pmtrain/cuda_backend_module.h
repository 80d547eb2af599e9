// The boundary between pmtrain and its CUDA backend, which is a shared module (libpmtrain_cuda_backend.so,
// pmtrain/cuda_backend_module.cpp) that pmtrain dlopen()s only for `backend: cuda` (cuda_backend_loader.h),
// so a CPU run of a CUDA-enabled build maps no cuBLAS, cuBLASLt, NCCL or CUDA runtime.
//
// The module exports one extern "C" symbol, ZERO_PMTRAIN_CUDA_BACKEND_ENTRY, returning a CudaBackendApi. C++ objects cross
// the boundary (DeviceOps, Communicator, ModelOps, std::string, exceptions). That is safe here because the
// module is built by the same build as the executable that loads it, from the same headers with the same
// compiler and standard library, and the loader checks this: `abi` (kCudaBackendAbi, bumped whenever this
// header or backend_parts.h changes) first, then `compiler` (__VERSION__). One copy of the shared code: the
// module links only the CUDA code (zero_cuda, zero_model_cuda) and the CUDA libraries; everything else it
// uses (core, comm, engine, model: the tracking allocator, Communicator, the error types and their
// typeinfo) it takes from the executable, which exports its symbols (ENABLE_EXPORTS), so an exception
// thrown in the module is caught by pmtrain's handlers by type. The module is never unloaded (its code
// runs the destructors of the objects it made).
#pragma once
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "model/attention.h"
#include "model/param_access.h"
#include "pmtrain/backend_parts.h"
#include "pmtrain/device_memory.h"

namespace zero::pmtrain {

// 2: BackendParts carries the step clock; 3: device_bytes_in_use; 4: probe_devices; 5: hybrid sharding
// (CudaBackendOptions::shard_ranks, BackendParts::replica_comm)
inline constexpr int kCudaBackendAbi = 6;
// The entry point's name, defined by the module and looked up by the loader.
#define ZERO_PMTRAIN_CUDA_BACKEND_ENTRY zero_pmtrain_cuda_backend

// What the module needs from the config, resolved by pmtrain (the module never sees a Config).
struct CudaBackendOptions {
  DType activations = DType::BF16;  // BF16: bf16 mode (fp32 residual and statistics); F32: fp32 mode
  model::AttentionKind attention = model::AttentionKind::Auto;
  int shard_ranks = 0;  // hybrid sharding: ranks of a shard group, resolved (shard_group_ranks); 0 = the world
  // The run's MPI communicator's PeerWatch (over MPI_COMM_WORLD): the NCCL communicators wait through it too, so
  // one watch serves every wait of the job (comm/peer_watch.h). Null: NCCL makes its own.
  std::shared_ptr<PeerWatch> job_watch;
};

struct CudaBackendApi {
  int abi = kCudaBackendAbi;  // first, at a fixed offset: read before anything else
  const char* compiler = __VERSION__;
  // Devices the CUDA runtime sees; 0 without a GPU or a driver. Never throws.
  int (*device_count)() = nullptr;
  // train/eval, collective over MPI_COMM_WORLD: picks this rank's device, CudaOps + NcclCommunicator + the
  // model's CUDA ops on one stream, the device allocator.
  BackendParts (*make_training)(const CudaBackendOptions& options, int rank) = nullptr;
  // score (one process): the model's CUDA ops on device 0 and a device copy of `host`.
  ScoringBackend (*make_scoring)(const CudaBackendOptions& options, const model::DenseParams& host) = nullptr;
  // Bytes in use on this process's current device (cudaMemGetInfo: total - free), for `pmtrain bench`.
  size_t (*device_bytes_in_use)() = nullptr;
  // Collective over MPI_COMM_WORLD: picks this rank's device as make_training will, and returns every rank's
  // (index = rank), so each rank checks the memory plan against the same tightest GPU.
  std::vector<DeviceMemory> (*probe_devices)() = nullptr;
};

// The module's entry point (extern "C" ZERO_PMTRAIN_CUDA_BACKEND_ENTRY). Never throws; the result lives as long
// as the module.
using CudaBackendEntry = const CudaBackendApi* (*)();

}  // namespace zero::pmtrain
