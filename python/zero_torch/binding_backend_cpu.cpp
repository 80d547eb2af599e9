// The binding on the CPU backend: host memory, MPI collectives; torch's CPU tensors are the caller's buffers.
#include <mpi.h>

#include <tuple>

#include "comm/hybrid_groups.h"
#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#include "python/zero_torch/binding_backend.h"

namespace zero::torch_binding {
namespace {

class CpuBindingBackend final : public BindingBackend {
 public:
  explicit CpuBindingBackend(int shard_ranks) {
    int world = 1;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    const bool hybrid = hybrid_sharding(shard_ranks, world);
    if (hybrid) {
      world_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);  // its watch serves both rings too
      std::tie(comm_, replicas_) =
          make_hybrid_communicators<MpiCommunicator>(MPI_COMM_WORLD, shard_ranks, world_->shared_peer_watch());
    } else {
      comm_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
    }
    ops_ = make_cpu_ops();
    alloc_ = std::make_unique<TrackingAllocator>(make_host_allocator());
    description_ = hybrid
                       ? "cpu (MPI, hybrid: shard groups of " + std::to_string(shard_ranks) + " ranks)"
                       : "cpu (MPI)";
  }
  void begin_transfer(uintptr_t, const std::vector<CallerBuffer>&) override {}
  void end_transfer(uintptr_t, const std::vector<CallerBuffer>&) override {}
};

}  // namespace

std::unique_ptr<BindingBackend> make_binding_backend(int shard_ranks) {
  return std::make_unique<CpuBindingBackend>(shard_ranks);
}
const char* binding_backend_name() { return "cpu"; }

}  // namespace zero::torch_binding
