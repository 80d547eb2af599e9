// make_backend: CPU (host memory, MPI) here, or CUDA (device memory, NCCL, CudaModelOps on the ops' stream)
// from the CUDA backend module.
#include "pmtrain/backend_setup.h"

#include <cstring>
#include <tuple>

#include "comm/hybrid_groups.h"
#include "comm/mpi_communicator.h"
#include "core/check.h"
#include "core/out_of_memory.h"
#include "pmtrain/cuda_backend_loader.h"
#include "pmtrain/engine_assembly.h"
#include "pmtrain/model_setup.h"
#include "zero/device_ops.h"

namespace zero::pmtrain {

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const OutOfMemory*>(&e)) return true;
  return std::strstr(e.what(), "out of memory") != nullptr;
}

void require_backend_here(const Config& cfg, int rank) {
  if (cfg.backend != Backend::Cuda) return;
  const CudaBackendLoad& cuda = load_cuda_backend();
  ZERO_REQUIRE(cuda.api, ConfigError, "{}: backend cuda: {}; use --set backend=cpu to run on the CPU backend",
               cfg.source, cuda.error);
  // Every rank must see a GPU; say so in one line rather than as a CUDA error.
  ZERO_REQUIRE(cuda.api->device_count() > 0, ConfigError,
               "{}: backend cuda: no CUDA device is visible on this machine (rank {}); run on a GPU node or use "
               "--set backend=cpu to run on the CPU backend",
               cfg.source, rank);
}

namespace {
// What the CUDA module needs of the config. zero.param_dtype picks the model's mode: bf16 parameters ->
// bf16 activations (fp32 residual and statistics), fp32 -> everything fp32.
CudaBackendOptions cuda_options(const Config& cfg, int world) {
  CudaBackendOptions o;
  o.activations = cfg.zero.param_dtype == DType::BF16 ? DType::BF16 : DType::F32;
  o.attention = reward_model_options(cfg).attention;
  o.shard_ranks = shard_group_ranks(cfg, world);
  return o;
}
}  // namespace

ScoringBackend make_scoring_backend(const Config& cfg, const model::DenseParams& host) {
  require_backend_here(cfg, 0);
  if (cfg.backend == Backend::Cuda) return load_cuda_backend().api->make_scoring(cuda_options(cfg, 1), host);
  ScoringBackend b;
  b.description = "cpu";
  return b;
}

size_t device_bytes_in_use(const Config& cfg) {
  return cfg.backend == Backend::Cuda ? load_cuda_backend().api->device_bytes_in_use() : 0;
}

std::vector<DeviceMemory> probe_devices(const Config& cfg, int rank) {
  if (cfg.backend != Backend::Cuda) return {};
  require_backend_here(cfg, rank);
  const CudaBackendLoad& cuda = load_cuda_backend();
  ZERO_CHECK(cuda.api->probe_devices, "{}: the CUDA backend module {} has no probe_devices", cfg.source, cuda.path);
  return cuda.api->probe_devices();
}

BackendParts make_backend(const Config& cfg, Communicator& comm) {
  require_backend_here(cfg, comm.rank());
  if (cfg.backend == Backend::Cuda) {
    CudaBackendOptions o = cuda_options(cfg, comm.world());
    o.job_watch = comm.shared_peer_watch();  // NCCL's waits and the run's MPI ones through one watch
    return load_cuda_backend().api->make_training(o, comm.rank());
  }
  BackendParts b;
  // Hybrid sharding: MPI over the shard group and over the replicas (the run's communicator is MPI_COMM_WORLD).
  const int S = shard_group_ranks(cfg, comm.world());
  if (S < comm.world())
    std::tie(b.engine_comm, b.replica_comm) =
        make_hybrid_communicators<MpiCommunicator>(MPI_COMM_WORLD, S, comm.shared_peer_watch());
  b.ops = make_cpu_ops(int(cfg.threads));  // the rank's math threads (resolved before the backend is made)
  b.alloc = std::make_unique<TrackingAllocator>(make_host_allocator());
  b.clock = std::make_unique<HostStepClock>();
  b.description = "cpu (host memory, MPI)";
  return b;
}

}  // namespace zero::pmtrain
