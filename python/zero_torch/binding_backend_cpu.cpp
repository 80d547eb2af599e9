// The binding on the CPU backend: host memory, MPI collectives; torch's CPU tensors are the caller's buffers.
#include <mpi.h>

#include "comm/mpi_communicator.h"
#include "python/zero_torch/binding_backend.h"

namespace zero::torch_binding {
namespace {

class CpuBindingBackend final : public BindingBackend {
 public:
  CpuBindingBackend() {
    comm_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
    ops_ = make_cpu_ops();
    alloc_ = std::make_unique<TrackingAllocator>(make_host_allocator());
    description_ = "cpu (MPI)";
  }
  void begin_transfer(uintptr_t, const std::vector<CallerBuffer>&) override {}
  void end_transfer(uintptr_t, const std::vector<CallerBuffer>&) override {}
};

}  // namespace

std::unique_ptr<BindingBackend> make_binding_backend() { return std::make_unique<CpuBindingBackend>(); }
const char* binding_backend_name() { return "cpu"; }

}  // namespace zero::torch_binding
