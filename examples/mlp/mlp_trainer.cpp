// Example trainer: the MLP test model on the zero engine, under mpirun. Shows everything a trainer
// embedding the library does: bootstrap, communicator, engine config, the micro-step loop, step().
// Prints the loss of every step and, at the end, a checksum of the full parameters (fp64 sum and L2
// norm) so stages and world sizes can be compared from the command line.
// Checkpoints (docs/CHECKPOINTS.md): --run-dir enables them (saved every --save-every steps and at the
// end); --resume auto|PATH continues a run in a new process, at any world size and stage. The data order
// is a pure function of the step, so the step is the data cursor. A failed save (e.g. disk full) stops
// the run with an error; the previous checkpoint stays loadable and `latest` keeps naming it.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "comm/bootstrap.h"
#include "core/check.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/full_state.h"
#include "examples/mlp/mlp_training.h"

using namespace zero;

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  const LaunchInfo& info = mpi.info();
  CLI::App app{"zero example trainer: a tanh MLP on synthetic regression data"};
  EngineConfig cfg;
  BatchSpec batch{0, 4, 0};  // accum defaults to 2 unless --global is given
  int steps = 20, samples = 4096;
  float lr = 1e-2f;
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
  app.add_option("--lr", lr, "peak learning rate")->capture_default_str();
  app.add_option("--clip", cfg.clip_norm, "gradient clipping norm (0: off)")->capture_default_str();
  app.add_option("--param-dtype", param_dtype, "compute parameter dtype (fp32|bf16)")->capture_default_str();
  app.add_option("--accum-dtype", accum_dtype, "gradient accumulation dtype")->capture_default_str();
  app.add_option("--reduce-dtype", reduce_dtype, "reduction dtype on the wire")->capture_default_str();
  std::string run_dir, resume, dump_state;
  int save_every = 0, stop_at = 0;
  checkpoint::Retention retention;
  bool async_save = false;
  app.add_option("--run-dir", run_dir, "run directory: enables checkpoints under RUN/checkpoints/");
  app.add_option("--save-every", save_every, "checkpoint every N steps (0: only at the end)")->capture_default_str();
  app.add_option("--keep-last", retention.keep_last, "keep the newest K checkpoints")->capture_default_str();
  app.add_option("--keep-every", retention.keep_every, "also keep every checkpoint whose step is a multiple of M")
      ->capture_default_str();
  app.add_option("--resume", resume, "resume from 'auto' (the run dir's latest checkpoint, if any) or a step dir");
  app.add_flag("--async-save", async_save, "write checkpoints on a background thread");
  app.add_option("--stop-at", stop_at, "stop after this step, as if interrupted (the LR schedule still spans --steps)")
      ->capture_default_str();
  app.add_option("--dump-state", dump_state, "at the end, write the full fp32 master/m/v to this file (rank 0)");
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
    cfg.schedule = {optim::ScheduleKind::Cosine, lr, steps / 10, steps, 0.1f};

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
    const std::string config_text = fmt::format(
        "mlp_trainer stage={} bucket={} prefetch={} global={} micro={} accum={} steps={} samples={} dims={} lr={} "
        "clip={} param_dtype={} accum_dtype={} reduce_dtype={}", cfg.stage, cfg.bucket_elements, cfg.prefetch_depth,
        rb.global, rb.micro, rb.accum, steps, samples, fmt::join(dims, ","), lr, cfg.clip_norm, param_dtype,
        accum_dtype, reduce_dtype);
    std::optional<checkpoint::Checkpointer> ckpt;
    if (!run_dir.empty()) ckpt.emplace(engine, checkpoint::CheckpointOptions{run_dir, retention, async_save, true, config_text});
    ZERO_REQUIRE(save_every >= 0, ConfigError, "--save-every must be 0 or positive (got {})", save_every);
    ZERO_REQUIRE(ckpt || (save_every == 0 && !async_save && resume != "auto"), ConfigError,
                 "--save-every, --async-save and --resume auto need --run-dir");
    int start = 0;
    if (!resume.empty()) {
      const auto path = ckpt ? ckpt->resume_path(resume) : std::optional<std::string>(resume);
      if (path) {
        const auto res = ckpt ? ckpt->load(*path) : checkpoint::load_checkpoint(engine, *path);
        const auto& cur = res.state.data_cursor;  // {"step", "num_samples"}: the step is the data cursor here
        ZERO_REQUIRE(cur.is_object() && cur.value("step", int64_t(-1)) == res.state.step, InputError,
                     "{}: data cursor {} does not match step {}", *path, cur.dump(), res.state.step);
        ZERO_REQUIRE(cur.value("num_samples", int64_t(-1)) == samples, ConfigError,
                     "{} was saved with --samples {}, this run has --samples {}", *path, cur.value("num_samples", -1),
                     samples);
        start = int(res.state.step);
        ZERO_REQUIRE(start <= steps, ConfigError, "{} is at step {}, past --steps {}", *path, start, steps);
        if (info.rank == 0)
          printf("resumed from %s: step %d, optimizer step %lld (saved at world %d stage %d%s)\n", path->c_str(), start,
                 (long long)res.optimizer_step, res.saved_world, res.saved_stage, res.resharded ? ", resharded" : "");
      } else if (info.rank == 0) {
        printf("resume auto: no checkpoint under %s, starting at step 0\n", run_dir.c_str());
      }
    }
    auto train_state = [&](int step) {
      checkpoint::TrainState st;
      st.step = step;
      st.data_cursor = {{"step", step}, {"num_samples", samples}};
      st.rng = {{"model_seed", 1234}, {"data_seed", 99}};  // all randomness is seeded; nothing else to keep
      return st;
    };
    auto report_published = [&](bool published) {
      if (published && info.rank == 0) printf("checkpoint: saved step_%lld\n", (long long)ckpt->last_published_step());
    };
    ZERO_REQUIRE(stop_at >= 0 && stop_at <= steps, ConfigError, "--stop-at {} must be within 0..--steps {}", stop_at, steps);
    const int last = stop_at > 0 ? std::max(stop_at, start) : steps;
    example::train_from_step(model, engine, data, rb.global, rb.micro, start, last, [&](const example::StepLog& l) {
      if (info.rank == 0)
        printf("step %lld/%d | loss %.7f | grad-norm %.5f | lr %.3e%s\n", (long long)l.step, steps, l.loss,
               l.result.grad_norm, l.result.lr, l.result.applied ? "" : " | SKIPPED");
      if (!ckpt) return;
      report_published(ckpt->finish_pending());
      if (save_every > 0 && l.step % save_every == 0 && l.step < last) {
        ckpt->save(train_state(int(l.step)));
        report_published(!async_save);
      }
    });
    if (ckpt) {
      if (start < last) ckpt->save(train_state(last));
      const bool was_pending = ckpt->pending();
      ckpt->wait();
      report_published(start < last && (was_pending || !async_save));
    }
    if (!dump_state.empty()) {
      const auto st = checkpoint::gather_full_state(engine);
      if (info.rank == 0) checkpoint::write_full_state(dump_state, st);
    }
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
