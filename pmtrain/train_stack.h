// What a training step runs on, assembled from a config in one place for `pmtrain train` / eval (the
// Trainer) and `pmtrain bench`: the backend (make_backend), the model on the backend's ops, the engine over
// the model's groups with their first values (init_model_parameters), and the model's view of the engine's
// parameters. So a benchmark measures exactly the objects a run trains with.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/memory.h"
#include "core/step_clock.h"
#include "model/reward_model.h"
#include "pmtrain/config.h"
#include "pmtrain/engine_params.h"
#include "pmtrain/planner.h"
#include "zero/device_ops.h"
#include "zero/engine.h"

namespace zero::pmtrain {

struct TrainStack {
  // In construction order: members are destroyed in reverse, so the engine and the model's ops go before
  // the backend's communicator, allocator and stream.
  std::unique_ptr<DeviceOps> ops;
  std::unique_ptr<TrackingAllocator> alloc;
  std::unique_ptr<Communicator> engine_comm;  // the CUDA backend's NCCL communicator (null: the run's own)
                                               // or, under hybrid sharding, the shard group's
  std::unique_ptr<Communicator> replica_comm;  // hybrid sharding: across the shard groups (null: none)
  std::unique_ptr<StepClock> clock;            // the step-time breakdown the model's ops and the engine fill
  std::unique_ptr<model::Qwen3RewardModel> model;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<EngineParamAccess> access;
  std::string backend_description;  // for the log

  // The device bytes held at their peak: the engine's buffers plus the model's activations (each at its
  // own peak: an upper bound of their sum's peak). Host bytes on the CPU backend.
  size_t tracked_peak_bytes() const;
};

// One rank's memory plan for micro-batches of micro_pairs pairs, accum_steps a step, checked before any data
// is read or memory allocated: ConfigError (one line, the plan in it) when the backend cannot run here or the
// plan does not fit. The CPU backend: the whole plan in the node's host memory. The CUDA backend: the host's
// share (the process and its staging) in host memory, and the GPU plan on the tightest of the ranks' GPUs
// (collective over MPI_COMM_WORLD: every rank calls it); the GPU plan is the one returned. Resolves
// model.activation_checkpointing and batch.micro_tokens auto in cfg first (resolve_auto_choices against that
// same check); micro_pairs matters only to batches of pairs (a token budget's plan reads cfg).
MemoryPlan plan_and_check_run(Config& cfg, const model::Qwen3Config& qc, int rank, int world, int ranks_on_node,
                              int64_t micro_pairs, int64_t accum_steps);

// `comm`: the run's communicator (MPI_COMM_WORLD). Throws as make_backend does (one line) when the backend
// cannot run here. The engine holds no weights yet: init_stack_weights makes the config's, or a checkpoint's
// load brings its own (an init then thrown away would cost minutes at 8B).
TrainStack assemble_train_stack(const Config& cfg, Communicator& comm, const model::Qwen3Config& qc,
                                const EngineConfig& ec);

// The config's initial weights into the stack's engine (init_model_parameters: model.hf_dir or the random init,
// on init_threads of the node's cores); the log's description of them. Local: no communication.
std::string init_stack_weights(TrainStack& s, const Config& cfg, const model::Qwen3Config& qc, int ranks_on_node);

}  // namespace zero::pmtrain
