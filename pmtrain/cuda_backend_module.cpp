// The CUDA backend module (libpmtrain_cuda_backend.so): CudaOps + NcclCommunicator + the model's CUDA ops on
// one stream for train/eval, the model's CUDA ops on DeviceParams for score. Loaded by
// cuda_backend_loader.cpp for `backend: cuda` only; the boundary and why C++ objects may cross it are in
// cuda_backend_module.h.
#include <mpi.h>

#include <fmt/format.h>

#include <cstdio>
#include <tuple>

#include "comm/hybrid_groups.h"
#include "comm/mpi_check.h"
#include "cuda/check.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_allocator.h"
#include "cuda/device_select.h"
#include "cuda/event_step_clock.h"
#include "cuda/nccl_communicator.h"
#include "model/cuda/cuda_model_ops.h"
#include "model/cuda/device_params.h"
#include "pmtrain/cuda_backend_module.h"

namespace zero::pmtrain {
namespace {

BackendParts make_training(const CudaBackendOptions& o, int rank) {
  BackendParts b;
  const DeviceChoice dev = select_device(MPI_COMM_WORLD);
  if (dev.shared) isolate_ranks_for_shared_gpu(dev, rank);
  auto cuda_ops = make_cuda_ops();
  const cudaStream_t stream = cuda_ops->stream();
  // Hybrid sharding: NCCL over the shard group for the engine, and over the replicas of this rank's shard.
  std::unique_ptr<NcclCommunicator> nccl, replicas;
  int world = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  if (hybrid_sharding(o.shard_ranks, world)) {
    std::tie(nccl, replicas) = make_hybrid_communicators<NcclCommunicator>(MPI_COMM_WORLD, o.shard_ranks, o.job_watch,
                                                                          stream, kNcclSetupTimeout_s);
  } else {
    nccl = std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, stream, kNcclSetupTimeout_s, o.job_watch);
  }
  // The compute stream waits on NCCL's events (both rings' under hybrid sharding), so every host wait on it is
  // watched: a peer lost mid-step ends the job with its rank named instead of hanging in a stream
  // synchronisation. (The stack destroys the communicators after the model and the clock; CudaOps waits no
  // more once the step loop is over.)
  const HostWaitGuard guard = nccl->host_wait_guard(replicas.get());
  b.replica_comm = std::move(replicas);
  cuda_ops->waiter().set_guard(guard);
  b.model_ops = model::make_cuda_model_ops({stream, o.activations, o.attention}, guard);
  b.clock = make_event_step_clock(stream, guard);
  b.engine_comm = std::move(nccl);
  b.ops = std::move(cuda_ops);
  b.alloc = std::make_unique<TrackingAllocator>(make_device_allocator());
  b.model_reads_backend_memory = true;
  b.description = fmt::format("cuda (device {} of {}{}, NCCL, {} activations)", dev.device, dev.device_count,
                              dev.shared ? ", shared by ranks" : "", dtype_name(o.activations));
  return b;
}

size_t device_bytes_in_use() {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

std::vector<DeviceMemory> probe_devices() {
  const DeviceChoice dev = select_device(MPI_COMM_WORLD);
  // A fixed-size record per rank for one all-gather.
  struct Record {
    int64_t device, ranks_on_device;
    uint64_t free_bytes, total_bytes;
    char name[96];
  } mine{};
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev.device));
  mine.device = dev.device, mine.ranks_on_device = dev.ranks_on_device;
  mine.free_bytes = free_bytes, mine.total_bytes = total_bytes;
  std::snprintf(mine.name, sizeof mine.name, "%.*s", int(sizeof mine.name) - 1, prop.name);  // cut to fit
  int world = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  std::vector<Record> all(static_cast<size_t>(world));
  MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD));
  std::vector<DeviceMemory> out;
  for (int r = 0; r < world; ++r) {
    const Record& x = all[size_t(r)];
    out.push_back({r, int(x.device), int(x.ranks_on_device), size_t(x.free_bytes), size_t(x.total_bytes), x.name});
  }
  return out;
}

ScoringBackend make_scoring(const CudaBackendOptions& o, const model::DenseParams& host) {
  ScoringBackend b;
  b.model_ops = model::make_cuda_model_ops({nullptr, o.activations, o.attention});
  b.params = std::make_unique<model::DeviceParams>(host, o.activations, /*with_grads=*/false);
  b.description = fmt::format("cuda (device 0 of {}, {} weights and activations)", cuda_device_count(),
                              dtype_name(o.activations));
  return b;
}

}  // namespace
}  // namespace zero::pmtrain

extern "C" __attribute__((visibility("default"))) const zero::pmtrain::CudaBackendApi* ZERO_PMTRAIN_CUDA_BACKEND_ENTRY() {
  static const zero::pmtrain::CudaBackendApi api{.device_count = zero::cuda_device_count,
                                                 .make_training = zero::pmtrain::make_training,
                                                 .make_scoring = zero::pmtrain::make_scoring,
                                                 .device_bytes_in_use = zero::pmtrain::device_bytes_in_use,
                                                 .probe_devices = zero::pmtrain::probe_devices};
  return &api;
}
