// Test harness: an engine over MPI_COMM_WORLD on the test backend (CPU, or scrambled storage: see
// tests/common/test_backend.h), the MLP test model and its data.
#pragma once
#include <memory>
#include <vector>

#include "core/check.h"

#include "comm/mpi_communicator.h"
#include "tests/common/test_backend.h"
#include "examples/mlp/mlp_training.h"

namespace zero::testing {

struct Harness {
  std::unique_ptr<Communicator> comm = make_test_comm(MPI_COMM_WORLD);
  std::unique_ptr<DeviceOps> ops = make_test_ops();
  TrackingAllocator alloc{make_host_allocator()};
  example::MlpModel model;
  std::unique_ptr<Engine> engine;

  Harness(const EngineConfig& cfg, example::MlpSpec spec = {}) : model(spec) {
    engine = std::make_unique<Engine>(cfg, model.groups(), *comm, *ops, alloc);
    engine->init_params([&](int g, int t, float* dst) { model.init(g, t, dst); });
  }
  int world() const { return comm->world(); }
  int rank() const { return comm->rank(); }
};

// ||a - b|| / ||b||
inline double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(b[i]) * b[i];
  }
  return a.size() == b.size() ? std::sqrt(d / n) : 1e30;
}

// A gradient that depends on the step, rank, group and element only: never on the params, so two engines
// given it (one with a feature, one without) cannot drift apart through a forward pass.
inline float patterned_grad(int step, int rank, int g, size_t i) {
  return 0.01f * float(int((i * 2654435761u + size_t(step) * 97 + size_t(g) * 13 + size_t(rank) * 7) % 2001) - 1000);
}

// `steps` optimizer steps of 2 micro-steps, each writing patterned_grad into every grad_view (tensor t's
// elements numbered from 1000 t); every step must apply.
inline void train_patterned(Harness& h, int steps) {
  Engine& e = *h.engine;
  const int G = int(e.groups().size());
  for (int s = 0; s < steps; ++s) {
    for (int micro = 0; micro < 2; ++micro) {
      e.begin_micro_step();
      for (int g = 0; g < G; ++g) {
        e.gather(g);
        e.release(g);
      }
      e.begin_backward();
      for (int g = G - 1; g >= 0; --g) {
        e.gather(g);
        const GroupView& view = e.grad_view(g);
        for (size_t t = 0; t < view.size(); ++t) {
          std::vector<float> v(view[t].numel);
          for (size_t i = 0; i < v.size(); ++i) v[i] = patterned_grad(2 * s + micro, h.rank(), g, i + 1000 * t);
          h.ops->copy_from_host(view[t].data, view[t].dtype, v.data(), v.size());
        }
        e.grad_ready(g);
        e.release(g);
      }
    }
    ZERO_CHECK(e.step(double(2 * h.world())).applied, "train_patterned: step {} was skipped", s);
  }
}

inline EngineConfig base_config(int stage, int accum) {
  EngineConfig c;
  c.stage = stage;
  c.accum_steps = accum;
  c.bucket_elements = 100;  // several buckets, some holding several groups
  c.prefetch_depth = 1;
  c.adamw.weight_decay = 0.01f;
  c.schedule = {optim::ScheduleKind::Cosine, 1e-2f, 2, 12, 0.1f};
  c.clip_norm = 0.3f;
  return c;
}

}  // namespace zero::testing
