// What a compute backend hands pmtrain: for train/eval the engine's DeviceOps and allocator, the communicator
// the engine reduces over and the model's ops on the same device; for `pmtrain score` the model's ops and
// where they read the weights. Filled by backend_setup.cpp (CPU) or by the CUDA backend module
// (cuda_backend_module.h), so it names engine and model types only, never pmtrain's Config.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/memory.h"
#include "core/step_clock.h"
#include "model/model_ops.h"
#include "model/param_access.h"
#include "zero/device_ops.h"

namespace zero::pmtrain {

struct BackendParts {
  std::unique_ptr<DeviceOps> ops;
  std::unique_ptr<TrackingAllocator> alloc;
  std::unique_ptr<Communicator> engine_comm;  // null: the run's own communicator (MPI)
  // Hybrid sharding (zero.shard_ranks): engine_comm is this rank's shard group, replica_comm the ranks holding
  // its shard in the other groups (comm/hybrid_groups.h); null without.
  std::unique_ptr<Communicator> replica_comm;
  std::unique_ptr<model::ModelOps> model_ops;  // null: the model's default (the CPU's)
  bool model_reads_backend_memory = false;     // the model's ops take the engine's views in place
  std::unique_ptr<StepClock> clock;            // times the step (host clock; CUDA: events on the stream)
  std::string description;                     // for the log
};

// `pmtrain score` (one process, no MPI, no engine): the model's ops and where they read the weights.
struct ScoringBackend {
  std::unique_ptr<model::ModelOps> model_ops;  // null: the model's default (the CPU's)
  std::unique_ptr<model::ParamAccess> params;  // null: the host weights themselves; cuda: a device copy
  std::string description;                     // for the log
};

}  // namespace zero::pmtrain
