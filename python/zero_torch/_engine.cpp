// The engine for Python (pybind11): zero::Engine over MPI_COMM_WORLD on the backend this module is built for
// (binding_backend.h: _engine on the CPU, _engine_cuda on the GPU; ZERO_TORCH_MODULE names it). Parameters and
// gradients move between the engine's buffers and the caller's fp32 or bf16 buffers (torch tensors, by address:
// host memory for _engine, device memory of the engine's device for _engine_cuda) through the backend's own
// copy, ordered against the caller's stream. zero_torch/__init__.py builds the torch-facing wrapper on top.
#include <mpi.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpointer.h"
#include "comm/hybrid_groups.h"
#include "core/check.h"
#include "core/process_memory.h"
#include "optim/lr_schedule.h"
#include "python/zero_torch/binding_backend.h"
#include "zero/buffer_plan.h"
#include "zero/engine.h"

#ifndef ZERO_TORCH_MODULE
#define ZERO_TORCH_MODULE _engine
#endif

namespace py = pybind11;
using namespace zero;
using zero::torch_binding::BindingBackend;
using zero::torch_binding::CallerBuffer;

namespace {

// Engine(shard_ranks=...) for ZeroModel(shard_ranks="node") (zero_torch/__init__.py reads it as shard_ranks_node).
constexpr int kShardRanksNode = -1;

class PyEngine;
// Engines still open: closed (engine, then backend: NCCL and device memory) before MPI is finalised at exit.
std::set<PyEngine*>& open_engines() {
  static std::set<PyEngine*> engines;
  return engines;
}

// MPI is initialised on first use (mpirun python3 ...) and finalised at interpreter exit, after the engines
// still open are closed.
void ensure_mpi();

// The wrapper's group specs: [(group name, [(tensor name, numel, weight decay), ...]), ...] in forward order.
using GroupSpecs = std::vector<std::tuple<std::string, std::vector<std::tuple<std::string, size_t, bool>>>>;

std::vector<GroupInfo> group_infos(const GroupSpecs& groups) {
  std::vector<GroupInfo> infos;
  for (const auto& [name, tensors] : groups) {
    GroupInfo g{name, {}};
    for (const auto& [tname, numel, decay] : tensors) g.tensors.push_back({tname, numel, decay});
    infos.push_back(std::move(g));
  }
  return infos;
}

// The engine's configuration from the wrapper's arguments (the optimizer's are left at their defaults for
// a memory plan: they change no buffer).
EngineConfig binding_config(int stage, int accum_steps, size_t bucket_elements, int prefetch_depth, DType param_dtype,
                            DType reduce_dtype) {
  EngineConfig cfg;
  cfg.stage = stage;
  cfg.accum_steps = accum_steps;
  cfg.bucket_elements = bucket_elements;
  cfg.prefetch_depth = prefetch_depth;
  // bf16: the model's parameters and gradients in bf16, the fp32 master, m and v sharded (mixed precision
  // as DeepSpeed's bf16 mode runs it); gradients accumulate in fp32 either way.
  for (const auto& [key, t] : {std::pair{"param_dtype", param_dtype}, {"reduce_dtype", reduce_dtype}})
    ZERO_REQUIRE(t == DType::F32 || t == DType::BF16, ConfigError, "zero_torch: {} {}: expected fp32 or bf16", key,
                 dtype_name(t));
  cfg.param_dtype = param_dtype;
  // The gradients' dtype on the wire (FSDP's MixedPrecision reduce_dtype, DeepSpeed's communication_data_type):
  // the shard group's reductions and hybrid sharding's all-reduce across groups.
  cfg.reduce_dtype = reduce_dtype;
  return cfg;
}

// The bytes one rank's engine allocates for these groups at `world` ranks (zero/buffer_plan.h: all of it at
// construction, nothing inside a step), by the allocator's categories, with "total" and "host" (what
// lives in host memory: an offloaded optimizer; 0 here). No MPI: a plan before any launch.
py::dict memory_plan(const GroupSpecs& groups, int world, int stage, int accum_steps, size_t bucket_elements,
                     int prefetch_depth, DType param_dtype, int shard_ranks, DType reduce_dtype) {
  ZERO_REQUIRE(world >= 1, ConfigError, "zero_torch: world {}: expected at least 1 rank", world);
  const EngineConfig cfg = binding_config(stage, accum_steps, bucket_elements, prefetch_depth, param_dtype, reduce_dtype);
  validate(cfg);
  // Hybrid sharding: the engine is sharded over a group of shard_ranks (comm/hybrid_groups.h).
  const int S = shard_group_size(shard_ranks, world);
  const BufferPlan plan = plan_buffers(cfg, make_partition(group_infos(groups), S, cfg.bucket_elements), world / S);
  py::dict out;
  for (size_t c = 0; c < kMemCategories; ++c) out[mem_category_name(MemCategory(c))] = plan.bytes(MemCategory(c));
  out["total"] = plan.total_bytes();
  out["host"] = plan.host_bytes();
  return out;
}

class PyEngine {
 public:
  PyEngine(const GroupSpecs& groups, int stage, int accum_steps, float lr, float beta1, float beta2, float eps,
           float weight_decay, float clip_norm, size_t bucket_elements, int prefetch_depth, DType param_dtype,
           optim::ScheduleKind schedule, int64_t warmup_steps, int64_t total_steps, float min_lr_ratio,
           int shard_ranks, DType reduce_dtype) {
    ensure_mpi();
    if (shard_ranks == kShardRanksNode) {  // "node": the launch's block of ranks a node
      shard_ranks = node_block_ranks(nodes_of_ranks(MPI_COMM_WORLD));
      ZERO_REQUIRE(shard_ranks > 0, ConfigError, "zero_torch: {}", node_placement_error("shard_ranks='node'", "shard_ranks"));
    }
    backend_ = torch_binding::make_binding_backend(shard_ranks);
    EngineConfig cfg = binding_config(stage, accum_steps, bucket_elements, prefetch_depth, param_dtype, reduce_dtype);
    cfg.adamw = {beta1, beta2, eps, weight_decay};
    cfg.schedule = {schedule, lr, warmup_steps, total_steps, min_lr_ratio};
    cfg.clip_norm = clip_norm;
    engine_ = std::make_unique<Engine>(cfg, group_infos(groups), backend_->comm(), backend_->ops(), backend_->alloc(),
                                       backend_->replicas());
    open_engines().insert(this);
  }
  ~PyEngine() { close(); }
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;

  void close() {
    engine_.reset();
    backend_.reset();
    open_engines().erase(this);
  }
  Engine& e() {
    ZERO_REQUIRE(engine_, ConfigError, "zero_torch: the engine was closed (at interpreter exit)");
    return *engine_;
  }
  BindingBackend& backend() {
    e();
    return *backend_;
  }

  // Copies group g's gathered parameters into the caller's buffers of dtype `dt` (one per tensor, each at least
  // its numel), then releases the group.
  void gather_into(int g, const std::vector<uintptr_t>& dst, DType dt, uintptr_t stream) {
    const GroupView views = e().gather(g);
    const std::vector<CallerBuffer> bufs = caller_buffers(g, views, dst, dt, "gather_into");
    transfer(stream, bufs, [&] {
      for (size_t t = 0; t < views.size(); ++t)
        backend_->ops().copy(const_cast<void*>(bufs[t].data), dt, views[t].data, views[t].dtype, views[t].numel);
    });
    e().release(g);
  }
  // Copies the caller's gradients of dtype `dt` (address 0: the tensor got none, a zero gradient) into group
  // g's gradient views and hands them to the engine.
  void grads_from(int g, const std::vector<uintptr_t>& src, DType dt, uintptr_t stream) {
    const GroupView views = e().grad_view(g);
    const std::vector<CallerBuffer> bufs = caller_buffers(g, views, src, dt, "grads_from");
    transfer(stream, bufs, [&] {
      for (size_t t = 0; t < views.size(); ++t) {
        if (bufs[t].data) backend_->ops().copy(views[t].data, views[t].dtype, bufs[t].data, dt, views[t].numel);
        else backend_->ops().zero(views[t].data, views[t].dtype, views[t].numel);
      }
    });
    e().grad_ready(g);
  }

 private:
  // The backend's copies between the engine and the caller's buffers, bracketed (binding_backend.h); the
  // bracket is closed when a copy throws too (its error is the one raised).
  template <class Copies>
  void transfer(uintptr_t stream, const std::vector<CallerBuffer>& bufs, Copies&& copies) {
    backend_->begin_transfer(stream, bufs);
    try {
      copies();
    } catch (...) {
      try {
        backend_->end_transfer(stream, bufs);
      } catch (...) {
      }
      throw;
    }
    backend_->end_transfer(stream, bufs);
  }

  std::vector<CallerBuffer> caller_buffers(int g, const GroupView& views, const std::vector<uintptr_t>& addr, DType dt,
                                           const char* what) {
    ZERO_REQUIRE(dt == DType::F32 || dt == DType::BF16, ConfigError, "zero_torch: {}({}): buffers of {}", what, g,
                 dtype_name(dt));
    ZERO_REQUIRE(addr.size() == views.size(), ConfigError, "zero_torch: {}({}): {} buffers for the group's {} tensors",
                 what, g, addr.size(), views.size());
    std::vector<CallerBuffer> out;
    for (size_t t = 0; t < views.size(); ++t)
      out.push_back({reinterpret_cast<const void*>(addr[t]), addr[t] ? views[t].numel * dtype_size(dt) : 0});
    return out;
  }

  std::unique_ptr<BindingBackend> backend_;  // before the engine, which is destroyed first
  std::unique_ptr<Engine> engine_;
};

void ensure_mpi() {
  int up = 0;
  MPI_Initialized(&up);
  if (up) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    while (!open_engines().empty()) (*open_engines().begin())->close();
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }));
}

}  // namespace

PYBIND11_MODULE(ZERO_TORCH_MODULE, m) {
  m.doc() = "zero::Engine (MPI ranks) for the zero_torch wrapper";
  m.attr("backend") = torch_binding::binding_backend_name();
  // The engine's own defaults, so the wrapper does not keep copies of them.
  m.attr("default_bucket_elements") = EngineConfig{}.bucket_elements;
  m.attr("default_prefetch_depth") = EngineConfig{}.prefetch_depth;
  m.attr("shard_ranks_node") = kShardRanksNode;
  // zero::Error becomes zero_torch.ZeroError (one Python class, whichever module raised it).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const zero::Error& e) {
      PyErr_SetString(py::module_::import("zero_torch").attr("ZeroError").ptr(), e.what());
    }
  });
  // The element types of the engine's parameters and of the caller's buffers (the wrapper maps torch's once).
  py::enum_<DType>(m, "DType").value("F32", DType::F32).value("BF16", DType::BF16);
  // The learning-rate schedules under their spellings (optim::schedule_names, the table pmtrain reads too).
  py::enum_<optim::ScheduleKind> schedules(m, "Schedule");
  for (const auto& [name, kind] : optim::schedule_names()) schedules.value(name.c_str(), kind);
  m.def("memory_plan", &memory_plan, py::arg("groups"), py::arg("world"), py::arg("stage"), py::arg("accum_steps"),
        py::arg("bucket_elements"), py::arg("prefetch_depth"), py::arg("param_dtype"), py::arg("shard_ranks"),
        py::arg("reduce_dtype"));
  py::class_<PyEngine>(m, "Engine")
      .def(py::init<const GroupSpecs&, int, int, float, float, float, float, float, float, size_t, int, DType,
                    optim::ScheduleKind, int64_t, int64_t, float, int, DType>(),
           py::arg("groups"), py::arg("stage"), py::arg("accum_steps"), py::arg("lr"), py::arg("beta1"),
           py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("clip_norm"),
           py::arg("bucket_elements"), py::arg("prefetch_depth"), py::arg("param_dtype"), py::arg("schedule"),
           py::arg("warmup_steps"), py::arg("total_steps"), py::arg("min_lr_ratio"), py::arg("shard_ranks"),
           py::arg("reduce_dtype"))
      // Data parallelism's rank and world: every rank (the engine's communicator is a shard group's under hybrid
      // sharding).
      .def_property_readonly("rank", [](PyEngine& p) { return p.e().data_rank(); })
      .def_property_readonly("world", [](PyEngine& p) { return p.e().data_world(); })
      .def_property_readonly("device", [](PyEngine& p) { return p.backend().device(); })
      .def_property_readonly("description", [](PyEngine& p) { return p.backend().description(); })
      .def("set_tensor",
           [](PyEngine& p, int g, int t, py::array_t<float, py::array::c_style | py::array::forcecast> full) {
             p.e().set_tensor(g, t, full.data());
           })
      .def("begin_micro_step", [](PyEngine& p) { p.e().begin_micro_step(); })
      .def("begin_forward", [](PyEngine& p) { p.e().begin_forward(); })
      .def("begin_backward", [](PyEngine& p) { p.e().begin_backward(); })
      .def("gather_into", &PyEngine::gather_into, py::arg("group"), py::arg("dst"), py::arg("dtype"), py::arg("stream"))
      .def("grads_from", &PyEngine::grads_from, py::arg("group"), py::arg("src"), py::arg("dtype"), py::arg("stream"))
      .def("step",
           [](PyEngine& p, double divisor) {
             const StepResult r = p.e().step(divisor);
             py::dict d;
             d["applied"] = r.applied;
             d["grad_norm"] = r.grad_norm;
             d["clip_coef"] = r.clip_coef;
             d["lr"] = r.lr;
             d["step"] = r.step;
             return d;
           })
      .def("full_master",
           [](PyEngine& p, int g) {
             const std::vector<float> v = p.e().full_master(g);
             return py::array_t<float>(py::ssize_t(v.size()), v.data());
           })
      // Sharded checkpoints (checkpoint/checkpointer.h, pmtrain's format): <run_dir>/checkpoints/step_<step>,
      // the engine's master weights and optimizer state with `extra` (JSON text) beside them; the newest
      // keep_last kept. Collective.
      .def("save_checkpoint",
           [](PyEngine& p, const std::string& run_dir, int64_t step, const std::string& extra, int keep_last) {
             checkpoint::CheckpointOptions o;
             o.run_dir = run_dir;
             o.retention.keep_last = keep_last;
             o.world = &p.backend().world();
             checkpoint::Checkpointer ckpt(p.e(), o);
             checkpoint::TrainState state;
             state.step = step;
             state.extra = nlohmann::json::parse(extra);
             ckpt.save(state);
             ckpt.wait();
           },
           py::arg("run_dir"), py::arg("step"), py::arg("extra"), py::arg("keep_last"))
      // Loads `which` ("auto": the newest complete checkpoint of run_dir; else a step_<N> directory), at any
      // world size and stage (resharded); None when "auto" finds none. Collective.
      .def("load_checkpoint",
           [](PyEngine& p, const std::string& run_dir, const std::string& which) -> py::object {
             checkpoint::CheckpointOptions o;
             o.run_dir = run_dir;
             o.world = &p.backend().world();
             checkpoint::Checkpointer ckpt(p.e(), o);
             const std::optional<std::string> dir = ckpt.resume_path(which);
             if (!dir) return py::none();
             const checkpoint::LoadResult r = ckpt.load(*dir);
             py::dict d;
             d["step"] = r.state.step;
             d["extra"] = r.state.extra.dump();
             d["dir"] = r.dir;
             d["saved_world"] = r.saved_world;
             d["saved_stage"] = r.saved_stage;
             d["resharded"] = r.resharded;
             return d;
           },
           py::arg("run_dir"), py::arg("which"))
      .def("live_bytes", [](PyEngine& p) { return p.e().memory_report().live_total; })
      .def("peak_bytes", [](PyEngine& p) { return p.e().memory_report().peak_total; })  // the engine's buffers
      .def("live_bytes_by_category",  // the allocator's count, by memory_plan's keys
           [](PyEngine& p) {
             const MemoryStats st = p.e().memory_report();
             py::dict out;
             for (size_t c = 0; c < kMemCategories; ++c) out[mem_category_name(MemCategory(c))] = st.live[c];
             return out;
           })
      .def("close", &PyEngine::close)
      .def_static("peak_resident_bytes", [] { return peak_resident_bytes(); });
}
