// What the binding's engine runs on, chosen at build time: binding_backend_cpu.cpp (CpuOps on host memory,
// MpiCommunicator) is linked into the module _engine, binding_backend_cuda.cpp (CudaOps on the current
// device, NcclCommunicator on its own stream) into _engine_cuda. _engine.cpp is the same for both: it moves
// parameters and gradients between the engine's buffers and the caller's (torch tensors, by address) with the
// backend's own copy, inside a Transfer that orders the caller's stream and the backend's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/memory.h"
#include "zero/device_ops.h"

namespace zero::torch_binding {

struct CallerBuffer {
  const void* data = nullptr;
  size_t bytes = 0;
};

class BindingBackend {
 public:
  virtual ~BindingBackend() = default;
  Communicator& comm() { return *comm_; }  // the engine's: a shard group's under hybrid sharding
  Communicator* replicas() { return replicas_.get(); }  // hybrid sharding: across the groups (null: none)
  Communicator& world() { return world_ ? *world_ : *comm_; }  // every rank (checkpoints agree over it)
  DeviceOps& ops() { return *ops_; }
  TrackingAllocator& alloc() { return *alloc_; }
  int device() const { return device_; }  // the CUDA device this rank runs on; -1 on the CPU
  const std::string& description() const { return description_; }

  // Brackets the backend's copies between the engine and the caller's buffers. begin: the backend's work
  // waits for what the caller queued on `stream` so far (the buffers were written, or last used before the
  // caller's allocator handed them out again, there); end: the caller's later work on `stream` waits for the
  // copies (it reads the buffers, or frees them for reuse, there). The CPU's copies are done when they
  // return: both do nothing there.
  virtual void begin_transfer(uintptr_t stream, const std::vector<CallerBuffer>& buffers) = 0;
  virtual void end_transfer(uintptr_t stream, const std::vector<CallerBuffer>& buffers) = 0;

 protected:
  // Declared in this order so the communicators outlive the ops whose host waits they guard.
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> replicas_;
  std::unique_ptr<Communicator> world_;  // MPI over every rank, where comm_ is not (hybrid sharding)
  std::unique_ptr<DeviceOps> ops_;
  std::unique_ptr<TrackingAllocator> alloc_;
  int device_ = -1;
  std::string description_;
};

// Collective over MPI_COMM_WORLD (MPI must be initialised). The CUDA one selects the device by node-local
// rank (cuda/device_select.h) and makes it current. shard_ranks (0, or the world: none): hybrid sharding over
// groups of that many consecutive ranks (comm/hybrid_groups.h; ConfigError unless it divides the world).
std::unique_ptr<BindingBackend> make_binding_backend(int shard_ranks);
const char* binding_backend_name();  // "cpu" or "cuda"

}  // namespace zero::torch_binding
