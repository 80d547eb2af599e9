// Engine step time per ZeRO stage relative to stage 0 (plain DDP), measured in the same run on the
// MLP test model: median wall time of an optimizer step (accum micro-steps + step()), max over ranks.
// --fixed: each stage also with fixed-point gradient sums (zero.world_invariant's FX64 accumulator and
// wire), and their ratio to that stage's fp32 sums.
//   mpirun -np 4 engine_step_bench [--width 512] [--depth 6] [--steps 20] [--fixed]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "comm/bootstrap.h"
#include "examples/mlp/mlp_training.h"

using namespace zero;

namespace {
size_t model_params(const example::MlpModel& model) {
  size_t n = 0;
  for (const GroupInfo& g : model.groups()) n += g.numel();
  return n;
}
}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  int width = 512, depth = 6, steps = 20, micro = 8, accum = 2;
  bool fixed = false;
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--fixed")) fixed = true;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!strcmp(argv[i], "--width")) width = std::stoi(argv[++i]);
    else if (!strcmp(argv[i], "--depth")) depth = std::stoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps")) steps = std::stoi(argv[++i]);
  }
  auto comm = mpi.world_communicator();
  const int W = comm->world(), R = comm->rank();
  std::vector<int> dims(depth + 1, width);
  dims.front() = 64;
  dims.back() = 32;
  example::MlpModel model({dims, 7});
  example::MlpDataset data(4096, 64, 3);
  double base = 0;
  if (R == 0)
    printf("# engine_step_bench: world %d, MLP %d x %d, micro %d, accum %d, fp32, bucket 2^20\n", W, depth,
           width, micro, accum);
  // The median step (max over ranks) of one engine configuration.
  const auto measure = [&](const EngineConfig& cfg, MemoryStats* mem) {
    auto ops = make_cpu_ops();
    TrackingAllocator alloc(make_host_allocator());
    Engine engine(cfg, model.groups(), *comm, *ops, alloc);
    engine.init_params([&](int g, int t, float* dst) { model.init(g, t, dst); });
    std::vector<double> times;
    example::train_with_engine(model, engine, data, int64_t(micro) * accum * W, micro, 3);  // warm-up
    for (int s = 0; s < steps; ++s) {
      comm->barrier();
      const double t0 = MPI_Wtime();
      example::train_with_engine(model, engine, data, int64_t(micro) * accum * W, micro, 1);
      double t = MPI_Wtime() - t0;
      comm->all_reduce_scalars(&t, 1, ReduceOp::Max);
      times.push_back(t);
    }
    std::sort(times.begin(), times.end());
    *mem = engine.memory_report();
    return times[times.size() / 2];
  };
  for (int stage = 0; stage <= 3; ++stage) {
    EngineConfig cfg;
    cfg.stage = stage;
    cfg.accum_steps = accum;
    cfg.bucket_elements = 1 << 20;
    cfg.schedule.peak_lr = 1e-3f;
    MemoryStats mem;
    const double med = measure(cfg, &mem);
    if (stage == 0) base = med;
    if (R == 0)
      printf("stage %d: step %.3f ms (median of %d), ratio to stage 0 %.3f, params %zu, peak bytes/rank %zu\n", stage,
             med * 1e3, steps, med / base, model_params(model), mem.peak_total);
    if (!fixed) continue;
    cfg.accum_dtype = cfg.reduce_dtype = DType::FX64;
    MemoryStats fixed_mem;
    const double fixed_med = measure(cfg, &fixed_mem);
    if (R == 0)
      printf("stage %d, fixed-point sums: step %.3f ms, ratio to fp32 sums %.3f, peak bytes/rank %zu (%.3f)\n", stage,
             fixed_med * 1e3, fixed_med / med, fixed_mem.peak_total, double(fixed_mem.peak_total) / double(mem.peak_total));
  }
  return 0;
}
