// Test harness for checkpoint MPI tests: an engine with the MLP test model on any communicator (a
// sub-communicator of the first n world ranks stands in for "another world size" in one process), a run
// directory shared by all ranks, and the training loop from any step.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "checkpoint/checkpointer.h"
#include "checkpoint/full_state.h"
#include "comm/mpi_communicator.h"
#include "tests/common/test_backend.h"
#include "examples/mlp/mlp_training.h"

namespace zero::testing {

inline constexpr int64_t kGlobal = 12;  // divisible by every world size 1..4
inline constexpr int kTotalSteps = 8;

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int w = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  return w;
}

// A fresh empty directory with the same path on every rank (rank 0 picks it).
inline std::string shared_temp_dir(const std::string& name) {
  char buf[512] = {0};
  if (world_rank() == 0) {
    const auto p = std::filesystem::temp_directory_path() / fmt::format("zero_ckpt_{}_{}", name, ::getpid());
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    snprintf(buf, sizeof(buf), "%s", p.c_str());
  }
  MPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
  return buf;
}

// The first n world ranks (MPI_COMM_NULL on the others). Collective over MPI_COMM_WORLD.
class SubWorld {
 public:
  explicit SubWorld(int n) { MPI_Comm_split(MPI_COMM_WORLD, world_rank() < n ? 0 : MPI_UNDEFINED, world_rank(), &comm_); }
  ~SubWorld() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  bool member() const { return comm_ != MPI_COMM_NULL; }
  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

inline EngineConfig ckpt_config(int stage, int world) {
  EngineConfig c;
  c.stage = stage;
  c.accum_steps = world == 4 ? 1 : 2;  // exercise accumulation where the batch allows it
  if (kGlobal % (c.accum_steps * world) != 0) c.accum_steps = 1;
  c.bucket_elements = 100;
  c.prefetch_depth = 1;
  c.adamw.weight_decay = 0.01f;
  c.schedule = {optim::ScheduleKind::Cosine, 1e-2f, 2, kTotalSteps, 0.1f};
  c.clip_norm = 0.3f;
  return c;
}

struct MlpRun {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Communicator> replicas;  // hybrid sharding: across the shard groups (null: none)
  std::unique_ptr<DeviceOps> ops = testing::make_test_ops();
  TrackingAllocator alloc{make_host_allocator()};
  example::MlpModel model;
  example::MlpDataset data;
  std::unique_ptr<Engine> engine;

  MlpRun(MPI_Comm c, int stage, example::MlpSpec spec = {}) : MlpRun(c, MPI_COMM_NULL, stage, spec) {}
  // Hybrid sharding: `c` a shard group, `across` its replicas (comm/hybrid_groups.h).
  MlpRun(MPI_Comm c, MPI_Comm across, int stage, example::MlpSpec spec = {})
      : comm(testing::make_test_comm(c)),
        replicas(across == MPI_COMM_NULL ? nullptr : testing::make_test_comm(across)),
        model(spec),
        data(200, model.input_dim(), 7) {
    const int world = comm->world() * (replicas ? replicas->world() : 1);
    engine = std::make_unique<Engine>(ckpt_config(stage, world), model.groups(), *comm, *ops, alloc, replicas.get());
    engine->init_params([&](int g, int t, float* dst) { model.init(g, t, dst); });
  }
  void train(int first, int last) {
    const int64_t micro = kGlobal / (engine->config().accum_steps * engine->data_world());
    example::train_from_step(model, *engine, data, kGlobal, micro, first, last, {});
  }
  checkpoint::TrainState state(int step) const {
    checkpoint::TrainState s;
    s.step = step;
    s.data_cursor = {{"step", step}};
    s.rng = {{"seed", 7}};
    return s;
  }
};

inline checkpoint::CheckpointOptions ckpt_opts(const std::string& run_dir, bool async = false, int keep_last = 3) {
  checkpoint::CheckpointOptions o;
  o.run_dir = run_dir;
  o.async = async;
  o.retention.keep_last = keep_last;
  return o;
}

inline double rel_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double d = 0, n = 0;
  for (size_t g = 0; g < a.size(); ++g)
    for (size_t i = 0; i < a[g].size(); ++i) {
      d += (double(a[g][i]) - b[g][i]) * (double(a[g][i]) - b[g][i]);
      n += double(b[g][i]) * b[g][i];
    }
  return std::sqrt(d / n);
}

// Runs f expecting `ErrorT` whose message contains every piece of `parts`.
template <class ErrorT, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << parts.front() << "'";
  } catch (const ErrorT& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

}  // namespace zero::testing
