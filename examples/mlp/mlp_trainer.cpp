// Example trainer: the MLP test model on the zero engine, under mpirun. Shows everything a trainer
// embedding the library does: bootstrap, communicator, engine config, the micro-step loop, step().
// Prints the loss of every step and, at the end, a checksum of the full parameters (fp64 sum and L2
// norm) so stages and world sizes can be compared from the command line.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "comm/bootstrap.h"
#include "core/check.h"
#include "examples/mlp/mlp_training.h"

using namespace zero;

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  const LaunchInfo& info = mpi.info();
  CLI::App app{"zero example trainer: a tanh MLP on synthetic regression data"};
  EngineConfig cfg;
  BatchSpec batch{0, 4, 0};  // accum defaults to 2 unless --global is given
  int steps = 20, samples = 4096;
  cfg.adamw.lr = 1e-2f;
  std::string param_dtype = "fp32", accum_dtype = "fp32", reduce_dtype = "fp32";
  std::vector<int> dims = {12, 24, 18, 5};
  app.add_option("--stage", cfg.stage, "ZeRO stage 0-3")->capture_default_str();
  app.add_option("--bucket", cfg.bucket_elements, "bucket size in elements")->capture_default_str();
  app.add_option("--prefetch", cfg.prefetch_depth, "stage-3 prefetch depth")->capture_default_str();
  app.add_option("--micro", batch.micro, "samples per micro-batch")->capture_default_str();
  app.add_option("--accum", batch.accum, "micro-steps per optimizer step")->capture_default_str();
  app.add_option("--global", batch.global, "global batch (any two of micro/accum/global)")->capture_default_str();
  app.add_option("--steps", steps, "optimizer steps")->capture_default_str();
  app.add_option("--samples", samples, "dataset size")->capture_default_str();
  app.add_option("--dims", dims, "input and hidden widths")->capture_default_str();
  app.add_option("--lr", cfg.adamw.lr, "learning rate")->capture_default_str();
  app.add_option("--clip", cfg.clip_norm, "gradient clipping norm (0: off)")->capture_default_str();
  app.add_option("--param-dtype", param_dtype, "compute parameter dtype (fp32|bf16)")->capture_default_str();
  app.add_option("--accum-dtype", accum_dtype, "gradient accumulation dtype")->capture_default_str();
  app.add_option("--reduce-dtype", reduce_dtype, "reduction dtype on the wire")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return info.rank == 0 ? app.exit(e) : (e.get_exit_code());
  }
  try {
    if (batch.global == 0 && batch.accum == 0) batch.accum = 2;
    cfg.param_dtype = parse_dtype(param_dtype, "--param-dtype");
    cfg.accum_dtype = parse_dtype(accum_dtype, "--accum-dtype");
    cfg.reduce_dtype = parse_dtype(reduce_dtype, "--reduce-dtype");
    const ResolvedBatch rb = resolve_batch(batch, info.world);
    cfg.accum_steps = int(rb.accum);
    cfg.adamw.weight_decay = 0.01f;
    cfg.schedule = {optim::ScheduleKind::Cosine, cfg.adamw.lr, steps / 10, steps, 0.1f};

    auto comm = mpi.world_communicator();
    auto ops = make_cpu_ops();
    TrackingAllocator alloc(make_host_allocator());
    example::MlpModel model({dims, 1234});
    Engine engine(cfg, model.groups(), *comm, *ops, alloc);
    engine.init_params([&](int g, int t, float* dst) { model.init(g, t, dst); });
    example::MlpDataset data(samples, dims.front(), 99);
    if (info.rank == 0)
      printf("mlp_trainer: launcher %s, world %d, stage %d, global %lld = micro %lld x accum %lld x world %d, "
             "%zu params (%zu padded)\n", info.launcher.c_str(), info.world, cfg.stage, (long long)rb.global,
             (long long)rb.micro, (long long)rb.accum, info.world, engine.partition().total_numel,
             engine.partition().total_padded);
    example::train_with_engine(model, engine, data, rb.global, rb.micro, steps, [&](const example::StepLog& l) {
      if (info.rank == 0)
        printf("step %lld/%d | loss %.7f | grad-norm %.5f | lr %.3e%s\n", (long long)l.step, steps, l.loss,
               l.result.grad_norm, l.result.lr, l.result.applied ? "" : " | SKIPPED");
    });
    const auto full = example::full_parameters(engine);
    double sum = 0, sq = 0;
    for (float v : full) {
      sum += v;
      sq += double(v) * v;
    }
    const auto mem = engine.memory_report();
    if (info.rank == 0) {
      printf("checksum: sum %.9e l2 %.9e\n", sum, std::sqrt(sq));
      printf("memory per rank: live %zu bytes, peak %zu bytes\n", mem.live_total, mem.peak_total);
    }
  } catch (const Error& e) {
    fprintf(stderr, "mlp_trainer: rank %d: error: %s\n", info.rank, e.what());
    MpiRuntime::abort_all(1);
  }
  return 0;
}
