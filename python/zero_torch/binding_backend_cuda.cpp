// The binding on the CUDA backend: CudaOps on its own stream, NCCL on another (ordered by events, as in
// pmtrain), torch's CUDA tensors on the same device as the caller's buffers. torch works on its current
// stream, our ops on theirs: each transfer is ordered both ways by events, never by a host wait.
// Built with ZERO_TORCH_EMULATED against the emulated runtime (tests/cuda/emulated), where torch's tensors are
// host memory: a transfer lends them to the fake runtime as device memory for its length (fake_cuda_lent.h).
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <tuple>

#include <fmt/format.h>

#include "comm/hybrid_groups.h"
#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#include "cuda/check.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_allocator.h"
#include "cuda/device_select.h"
#include "cuda/nccl_communicator.h"
#include "python/zero_torch/binding_backend.h"
#ifdef ZERO_TORCH_EMULATED
#include "tests/cuda/emulated/fake_cuda_lent.h"
#endif

namespace zero::torch_binding {
namespace {

cudaStream_t as_stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

class CudaBindingBackend final : public BindingBackend {
 public:
  explicit CudaBindingBackend(int shard_ranks) {
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const DeviceChoice dev = select_device(MPI_COMM_WORLD);
    if (dev.shared) isolate_ranks_for_shared_gpu(dev, rank);
    auto cuda_ops = std::make_unique<CudaOps>();
    // Hybrid sharding: NCCL over the shard group for the engine and over the replicas, MPI over every rank for
    // the checkpoints' agreement.
    std::unique_ptr<NcclCommunicator> nccl, replicas;
    const bool hybrid = hybrid_sharding(shard_ranks, world);
    if (hybrid) {
      world_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);  // its watch serves both rings too
      std::tie(nccl, replicas) = make_hybrid_communicators<NcclCommunicator>(
          MPI_COMM_WORLD, shard_ranks, world_->shared_peer_watch(), cuda_ops->stream(), kNcclSetupTimeout_s);
    } else {
      nccl = std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, cuda_ops->stream());
    }
    // A lost peer named, not a hang in a stream wait (behind either ring under hybrid sharding).
    cuda_ops->waiter().set_guard(nccl->host_wait_guard(replicas.get()));
    replicas_ = std::move(replicas);
    stream_ = cuda_ops->stream();
    comm_ = std::move(nccl);
    ops_ = std::move(cuda_ops);
    alloc_ = std::make_unique<TrackingAllocator>(make_device_allocator());
    device_ = dev.device;
    description_ = fmt::format("cuda (device {} of {}{}, NCCL{})", dev.device, dev.device_count,
                               dev.shared ? ", shared by ranks" : "",
                               hybrid ? fmt::format(", hybrid: shard groups of {} ranks", shard_ranks) : std::string());
    CUDA_CHECK(cudaEventCreateWithFlags(&caller_done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&ops_done_, cudaEventDisableTiming));
  }
  ~CudaBindingBackend() override {
    CUDA_WARN(cudaEventDestroy(caller_done_));
    CUDA_WARN(cudaEventDestroy(ops_done_));
  }

  void begin_transfer(uintptr_t stream, const std::vector<CallerBuffer>& buffers) override {
#ifdef ZERO_TORCH_EMULATED
    for (const CallerBuffer& b : buffers)
      if (b.data) zero_fake_cuda_lend(b.data, b.bytes);
#else
    (void)buffers;
#endif
    CUDA_CHECK(cudaEventRecord(caller_done_, as_stream(stream)));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, caller_done_, 0));
  }
  void end_transfer(uintptr_t stream, const std::vector<CallerBuffer>& buffers) override {
    CUDA_CHECK(cudaEventRecord(ops_done_, stream_));
    CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream), ops_done_, 0));
#ifdef ZERO_TORCH_EMULATED
    for (const CallerBuffer& b : buffers)
      if (b.data) zero_fake_cuda_unlend(b.data);
#else
    (void)buffers;
#endif
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t caller_done_ = nullptr, ops_done_ = nullptr;
};

}  // namespace

std::unique_ptr<BindingBackend> make_binding_backend(int shard_ranks) {
  return std::make_unique<CudaBindingBackend>(shard_ranks);
}
const char* binding_backend_name() { return "cuda"; }

}  // namespace zero::torch_binding
