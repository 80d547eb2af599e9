#include "pmtrain/train_stack.h"

#include "core/check.h"
#include "pmtrain/backend_setup.h"
#include "pmtrain/engine_assembly.h"
#include "pmtrain/model_setup.h"

namespace zero::pmtrain {

MemoryPlan plan_and_check_run(Config& cfg, const model::Qwen3Config& qc, int rank, int world, int ranks_on_node,
                              int64_t micro_pairs, int64_t accum_steps) {
  const model::Qwen3RewardModel planned(qc, reward_model_options(cfg));  // its groups, no parameters
  const std::vector<GroupInfo> groups = engine_groups(planned.groups());
  auto host_plan = [&](const Config& c) {
    return plan_memory(c, qc, groups, world, ranks_on_node, micro_pairs, accum_steps);
  };
  require_backend_here(cfg, rank);  // no GPU: one line now, not after the data is read
  if (cfg.backend != Backend::Cuda) {
    // On the CPU each node's ranks choose by its own memory: every choice gives the same numbers.
    cfg = resolve_auto_choices(cfg, qc.num_layers, world, [&](const Config& c) { return node_use(host_plan(c)); });
    const MemoryPlan host = host_plan(cfg);
    require_fits(host, cfg, world);
    return host;
  }
  require_fits(host_plan(cfg), cfg, world);  // the host's share of a GPU run: no activations, whatever the auto choices
  const std::vector<DeviceMemory> devices = probe_devices(cfg, rank);
  auto gpu_plan = [&](const Config& c) {
    return plan_gpu_memory(c, qc, groups, world, micro_pairs, accum_steps, devices);
  };
  cfg = resolve_auto_choices(cfg, qc.num_layers, world, [&](const Config& c) { return node_use(gpu_plan(c)); });
  const MemoryPlan gpu = gpu_plan(cfg);
  require_fits(gpu, cfg, world);  // every rank saw the same devices: all stop here together, or none
  return gpu;
}

size_t TrainStack::tracked_peak_bytes() const {
  return engine->memory_report().peak_total + model->ops().peak_bytes();
}

TrainStack assemble_train_stack(const Config& cfg, Communicator& comm, const model::Qwen3Config& qc,
                                const EngineConfig& ec) {
  TrainStack s;
  BackendParts backend = make_backend(cfg, comm);
  s.ops = std::move(backend.ops);
  s.alloc = std::move(backend.alloc);
  s.engine_comm = std::move(backend.engine_comm);
  // The engine's own communicator (NCCL) waits under the run's timeout too: a lost peer ends the job with its
  // rank named (exit 76) instead of hanging in a stream wait. Slow phases widen both (Trainer::slow_phase).
  s.replica_comm = std::move(backend.replica_comm);
  for (Communicator* c : {s.engine_comm.get(), s.replica_comm.get()})
    if (c) c->set_peer_timeout(cfg.run.collective_timeout_s);
  // run.step_clock host: the host's clock in place of a GPU's events (the CPU backend's is the host's already).
  s.clock = cfg.run.step_clock == StepClockKind::Host ? std::make_unique<HostStepClock>() : std::move(backend.clock);
  s.backend_description = std::move(backend.description);
  // The backend's model ops (null: the model's default, the CPU's).
  s.model = std::make_unique<model::Qwen3RewardModel>(qc, reward_model_options(cfg), std::move(backend.model_ops));
  const std::vector<model::GroupSpec>& groups = s.model->groups();
  s.engine = std::make_unique<Engine>(ec, engine_groups(groups), s.engine_comm ? *s.engine_comm : comm, *s.ops, *s.alloc,
                                     s.replica_comm.get());
  // The step-time breakdown is always on: a scope costs two clock reads (CPU: ~55 ns a scope measured, about
  // 1.2k scopes in a 1.3 s tiny_cpu step, so < 0.01%) or two event records on the stream (CUDA).
  s.engine->set_step_clock(s.clock.get());
  s.model->ops().set_step_clock(s.clock.get());
  s.access = std::make_unique<EngineParamAccess>(*s.engine, groups, backend.model_reads_backend_memory);
  return s;
}

std::string init_stack_weights(TrainStack& s, const Config& cfg, const model::Qwen3Config& qc, int ranks_on_node) {
  return init_model_parameters(*s.engine, cfg.model, qc, s.model->groups(), init_threads(int(cfg.threads), ranks_on_node));
}

}  // namespace zero::pmtrain
