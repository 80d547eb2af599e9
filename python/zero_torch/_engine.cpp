// The engine for Python (pybind11): zero::Engine on the CPU backend over MPI_COMM_WORLD, with parameter
// and gradient views handed out as NumPy arrays over the engine's own memory (no copy; valid until the
// matching release / grad_ready). zero_torch/__init__.py builds the torch-facing wrapper on top.
#include <mpi.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/check.h"
#include "core/process_memory.h"
#include "zero/engine.h"

namespace py = pybind11;
using namespace zero;

namespace {

// MPI is initialised on first use (mpirun python3 ...) and finalised at interpreter exit.
void ensure_mpi() {
  int up = 0;
  MPI_Initialized(&up);
  if (up) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }));
}

// A float32 NumPy view of n elements at p; `owner` keeps the engine alive while the view exists.
py::array_t<float> view(const TensorView& t, py::object owner) {
  ZERO_REQUIRE(t.dtype == DType::F32, ConfigError, "zero_torch: only fp32 engine buffers are exposed (got {})",
               dtype_name(t.dtype));
  return py::array_t<float>({py::ssize_t(t.numel)}, {py::ssize_t(sizeof(float))}, static_cast<float*>(t.data), owner);
}

class PyEngine {
 public:
  // groups: [(group name, [(tensor name, numel, weight decay), ...]), ...] in forward order.
  PyEngine(const std::vector<std::tuple<std::string, std::vector<std::tuple<std::string, size_t, bool>>>>& groups,
           int stage, int accum_steps, float lr, float beta1, float beta2, float eps, float weight_decay,
           float clip_norm, size_t bucket_elements, int prefetch_depth) {
    ensure_mpi();
    comm_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
    ops_ = make_cpu_ops();
    alloc_ = std::make_unique<TrackingAllocator>(make_host_allocator());
    EngineConfig cfg;
    cfg.stage = stage;
    cfg.accum_steps = accum_steps;
    cfg.adamw = {beta1, beta2, eps, weight_decay};
    cfg.schedule.peak_lr = lr;  // constant: torch.optim.AdamW without a scheduler
    cfg.clip_norm = clip_norm;
    cfg.bucket_elements = bucket_elements;
    cfg.prefetch_depth = prefetch_depth;
    std::vector<GroupInfo> infos;
    for (const auto& [name, tensors] : groups) {
      GroupInfo g{name, {}};
      for (const auto& [tname, numel, decay] : tensors) g.tensors.push_back({tname, numel, decay});
      infos.push_back(std::move(g));
    }
    engine_ = std::make_unique<Engine>(cfg, std::move(infos), *comm_, *ops_, *alloc_);
  }

  Engine& e() { return *engine_; }
  std::unique_ptr<MpiCommunicator> comm_;
  std::unique_ptr<DeviceOps> ops_;
  std::unique_ptr<TrackingAllocator> alloc_;
  std::unique_ptr<Engine> engine_;
};

std::vector<py::array_t<float>> views(const GroupView& v, py::object owner) {
  std::vector<py::array_t<float>> out;
  for (const TensorView& t : v) out.push_back(view(t, owner));
  return out;
}

}  // namespace

PYBIND11_MODULE(_engine, m) {
  m.doc() = "zero::Engine (CPU backend, MPI) for the zero_torch wrapper";
  // The engine's own defaults, so the wrapper does not keep copies of them.
  m.attr("default_bucket_elements") = EngineConfig{}.bucket_elements;
  m.attr("default_prefetch_depth") = EngineConfig{}.prefetch_depth;
  py::register_exception<zero::Error>(m, "ZeroError");
  py::class_<PyEngine>(m, "Engine")
      .def(py::init<const std::vector<std::tuple<std::string, std::vector<std::tuple<std::string, size_t, bool>>>>&,
                    int, int, float, float, float, float, float, float, size_t, int>(),
           py::arg("groups"), py::arg("stage"), py::arg("accum_steps"), py::arg("lr"), py::arg("beta1"),
           py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("clip_norm"),
           py::arg("bucket_elements"), py::arg("prefetch_depth"))
      .def_property_readonly("rank", [](PyEngine& p) { return p.comm_->rank(); })
      .def_property_readonly("world", [](PyEngine& p) { return p.comm_->world(); })
      .def("set_tensor",
           [](PyEngine& p, int g, int t, py::array_t<float, py::array::c_style | py::array::forcecast> full) {
             p.e().set_tensor(g, t, full.data());
           })
      .def("begin_micro_step", [](PyEngine& p) { p.e().begin_micro_step(); })
      .def("begin_forward", [](PyEngine& p) { p.e().begin_forward(); })
      .def("begin_backward", [](PyEngine& p) { p.e().begin_backward(); })
      .def("gather", [](py::object self, int g) { return views(self.cast<PyEngine&>().e().gather(g), self); })
      .def("release", [](PyEngine& p, int g) { p.e().release(g); })
      .def("grad_view", [](py::object self, int g) { return views(self.cast<PyEngine&>().e().grad_view(g), self); })
      .def("grad_ready", [](PyEngine& p, int g) { p.e().grad_ready(g); })
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
      .def("live_bytes", [](PyEngine& p) { return p.e().memory_report().live_total; })
      .def_static("peak_resident_bytes", [] { return peak_resident_bytes(); });
}
