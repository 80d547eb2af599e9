// make_backend: CPU (host memory, MPI) or CUDA (device memory, NCCL, CudaModelOps on the ops' stream).
#include "pmtrain/backend_setup.h"

#include <cstring>

#include "core/check.h"
#include "zero/device_ops.h"
#include "pmtrain/model_setup.h"

#ifdef ZERO_PMTRAIN_CUDA
#include <mpi.h>

#include "cuda/check.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_allocator.h"
#include "cuda/device_select.h"
#include "cuda/nccl_communicator.h"
#include "model/cuda/cuda_model_ops.h"
#include "model/cuda/device_params.h"
#endif

namespace zero::pmtrain {

bool cuda_backend_built() {
#ifdef ZERO_PMTRAIN_CUDA
  return true;
#else
  return false;
#endif
}

bool is_out_of_memory(const std::exception& e) {
#ifdef ZERO_PMTRAIN_CUDA
  if (dynamic_cast<const model::cuda_pool::OutOfMemory*>(&e)) return true;
#endif
  return std::strstr(e.what(), "out of memory") != nullptr;
}

void require_backend_here(const Config& cfg, int rank) {
  if (cfg.backend != Backend::Cuda) return;
#ifdef ZERO_PMTRAIN_CUDA
  // Every rank must see a GPU; say so in one line rather than as a CUDA error.
  ZERO_REQUIRE(cuda_device_count() > 0, ConfigError,
               "{}: backend cuda: no CUDA device is visible on this machine (rank {}); run on a GPU node or use "
               "--set backend=cpu",
               cfg.source, rank);
#else
  (void)rank;
  throw ConfigError(fmt::format("{}: backend cuda: this build has no CUDA backend", cfg.source));
#endif
}

#ifdef ZERO_PMTRAIN_CUDA
namespace {
// zero.param_dtype picks the model's mode: bf16 parameters -> bf16 activations (fp32 residual and
// statistics), fp32 -> everything fp32.
DType cuda_mode(const Config& cfg) {
  return cfg.zero.param_dtype == DType::BF16 ? DType::BF16 : DType::F32;
}
}  // namespace
#endif

ScoringBackend make_scoring_backend(const Config& cfg, const model::DenseParams& host) {
  ScoringBackend b;
  require_backend_here(cfg, 0);
  if (cfg.backend == Backend::Cpu) {
    b.description = "cpu";
    return b;
  }
#ifdef ZERO_PMTRAIN_CUDA
  const DType act = cuda_mode(cfg);
  b.model_ops = model::make_cuda_model_ops({nullptr, act, reward_model_options(cfg.model).attention});
  b.params = std::make_unique<model::DeviceParams>(host, act, /*with_grads=*/false);
  b.description = fmt::format("cuda (device 0 of {}, {} weights and activations)", cuda_device_count(), dtype_name(act));
#else
  (void)host;
#endif
  return b;
}

size_t device_bytes_in_use(const Config& cfg) {
  if (cfg.backend != Backend::Cuda) return 0;
#ifdef ZERO_PMTRAIN_CUDA
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
#else
  return 0;
#endif
}

BackendParts make_backend(const Config& cfg, Communicator& comm) {
  BackendParts b;
  if (cfg.backend == Backend::Cpu) {
    b.ops = make_cpu_ops();
    b.alloc = std::make_unique<TrackingAllocator>(make_host_allocator());
    b.description = "cpu (host memory, MPI)";
    return b;
  }
  require_backend_here(cfg, comm.rank());
#ifdef ZERO_PMTRAIN_CUDA
  const DeviceChoice dev = select_device(MPI_COMM_WORLD);
  if (dev.shared) isolate_ranks_for_shared_gpu(comm.rank());
  auto cuda_ops = make_cuda_ops();
  const cudaStream_t stream = cuda_ops->stream();
  b.engine_comm = std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, stream);
  const DType act = cuda_mode(cfg);
  b.model_ops = model::make_cuda_model_ops({stream, act, reward_model_options(cfg.model).attention});
  b.ops = std::move(cuda_ops);
  b.alloc = std::make_unique<TrackingAllocator>(make_device_allocator());
  b.model_reads_backend_memory = true;
  b.description = fmt::format("cuda (device {} of {}{}, NCCL, {} activations)", dev.device, dev.device_count,
                              dev.shared ? ", shared by ranks" : "", dtype_name(act));
  return b;
#else
  throw InternalError("make_backend: backend cuda passed require_backend_here in a build without it");
#endif
}

}  // namespace zero::pmtrain
