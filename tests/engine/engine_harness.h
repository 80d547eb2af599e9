// Test harness: an engine over MPI_COMM_WORLD on the test backend (CPU, or scrambled storage: see
// tests/common/test_backend.h), the MLP test model and its data.
#pragma once
#include <memory>

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

inline EngineConfig base_config(int stage, int accum) {
  EngineConfig c;
  c.stage = stage;
  c.accum_steps = accum;
  c.bucket_elements = 100;  // several buckets, some holding several groups
  c.prefetch_depth = 1;
  c.adamw.lr = 1e-2f;
  c.adamw.weight_decay = 0.01f;
  c.schedule = {optim::ScheduleKind::Cosine, 1e-2f, 2, 12, 0.1f};
  c.clip_norm = 0.3f;
  return c;
}

}  // namespace zero::testing
