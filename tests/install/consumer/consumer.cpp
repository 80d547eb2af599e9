// An out-of-tree trainer of its own small model (y = W x + b, squared error) on the installed engine at
// stages 0-3, checked against a single-process full-batch reference written here with plain loops and
// the installed AdamW; then, with the installed checkpointer, the same run stopped halfway, saved, and
// resumed into an engine of the next stage, which must end on the same bits as the run never stopped.
// Prints lines per stage and exits non-zero on a mismatch. Usage: zero_consumer RUN_DIR
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "comm/mpi_communicator.h"
#include "optim/adamw.h"
#include "zero/engine.h"

namespace {
constexpr int kIn = 16, kOut = 5, kGlobal = 12, kSteps = 6;
constexpr float kLr = 1e-2f;  // constant: the schedule's peak

// Deterministic data and initial weights, the same on every rank.
float x_of(int sample, int i) { return std::sin(0.37f * float(sample) + 0.11f * float(i)); }
float t_of(int sample, int o) { return std::cos(0.23f * float(sample) - 0.5f * float(o)); }
float w0(int k) { return 0.05f * std::sin(1.3f * float(k)); }

// Sum over the samples of 0.5 (W x + b - t)^2 and its gradient (dW, db) at W, b.
double loss_and_grad(const std::vector<float>& W, const std::vector<float>& b, int first, int n, std::vector<float>& dW,
                     std::vector<float>& db) {
  dW.assign(W.size(), 0.0f);
  db.assign(b.size(), 0.0f);
  double loss = 0;
  for (int s = first; s < first + n; ++s)
    for (int o = 0; o < kOut; ++o) {
      float y = b[o];
      for (int i = 0; i < kIn; ++i) y += W[o * kIn + i] * x_of(s, i);
      const float e = y - t_of(s, o);
      loss += 0.5 * double(e) * e;
      db[o] += e;
      for (int i = 0; i < kIn; ++i) dW[o * kIn + i] += e * x_of(s, i);
    }
  return loss;
}

std::vector<zero::GroupInfo> model_groups() {
  return {{"proj", {{"proj.weight", size_t(kOut * kIn), true}}}, {"bias", {{"proj.bias", size_t(kOut), false}}}};
}

zero::EngineConfig engine_config(int stage, const zero::optim::AdamWConfig& adamw) {
  zero::EngineConfig cfg;
  cfg.stage = stage;
  cfg.bucket_elements = 64;
  cfg.adamw = adamw;
  cfg.schedule.peak_lr = kLr;
  return cfg;
}

// Optimizer steps [first, last) of the data-parallel run: each rank its share of step s's kGlobal samples.
void train(zero::Engine& engine, int first, int last) {
  const int W = engine.comm().world(), r = engine.comm().rank(), mine = kGlobal / W;
  for (int s = first; s < last; ++s) {
    engine.begin_micro_step();
    std::vector<float> Wt(kOut * kIn), bt(kOut), dW, db;
    engine.ops().copy_to_host(Wt.data(), engine.gather(0)[0].data, engine.gather(0)[0].dtype, Wt.size());
    engine.release(0);
    engine.ops().copy_to_host(bt.data(), engine.gather(1)[0].data, engine.gather(1)[0].dtype, bt.size());
    engine.release(1);
    loss_and_grad(Wt, bt, s * kGlobal + r * mine, mine, dW, db);
    engine.begin_backward();
    for (int g = 1; g >= 0; --g) {
      engine.gather(g);
      const zero::TensorView& v = engine.grad_view(g)[0];
      engine.ops().copy_from_host(v.data, v.dtype, g == 0 ? dW.data() : db.data(), v.numel);
      engine.grad_ready(g);
      engine.release(g);
    }
    engine.step(double(kGlobal));
  }
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int failures = 0;
  if (argc != 2) {
    fprintf(stderr, "usage: zero_consumer RUN_DIR\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const std::string run_dir = argv[1];
  {
    zero::MpiCommunicator comm(MPI_COMM_WORLD);
    const int W = comm.world(), r = comm.rank();
    zero::optim::AdamWConfig adamw;
    adamw.weight_decay = 0.01f;

    // The reference: full batch, one process.
    std::vector<float> rw(kOut * kIn), rb(kOut, 0.0f), mw(rw.size(), 0), vw(rw.size(), 0), mb(kOut, 0), vb(kOut, 0), gw, gb;
    for (int k = 0; k < kOut * kIn; ++k) rw[k] = w0(k);
    for (int s = 0; s < kSteps; ++s) {
      loss_and_grad(rw, rb, s * kGlobal, kGlobal, gw, gb);
      zero::optim::adamw_step(rw.data(), gw.data(), mw.data(), vw.data(), rw.size(), adamw, kLr, s + 1, true,
                              1.0f / kGlobal);
      zero::optim::adamw_step(rb.data(), gb.data(), mb.data(), vb.data(), rb.size(), adamw, kLr, s + 1, false,
                              1.0f / kGlobal);
    }

    auto ops = zero::make_cpu_ops();
    zero::TrackingAllocator alloc(zero::make_host_allocator());
    auto init = [](int g, int, float* dst) {
      for (int k = 0; k < (g == 0 ? kOut * kIn : kOut); ++k) dst[k] = g == 0 ? w0(k) : 0.0f;
    };
    for (int stage = 0; stage <= 3; ++stage) {
      zero::Engine engine(engine_config(stage, adamw), model_groups(), comm, *ops, alloc);
      engine.init_params(init);
      train(engine, 0, kSteps);
      const std::vector<float> fw = engine.full_master(0), fb = engine.full_master(1);
      double d = 0, n = 0;
      for (size_t k = 0; k < fw.size(); ++k) d += std::pow(fw[k] - rw[k], 2), n += std::pow(rw[k], 2);
      for (size_t k = 0; k < fb.size(); ++k) d += std::pow(fb[k] - rb[k], 2), n += std::pow(rb[k], 2);
      const double rel = std::sqrt(d / n);
      const bool ok = rel < 1e-5;
      failures += !ok;
      if (r == 0) printf("consumer: stage %d, world %d: parameters vs reference %.2e relative: %s\n", stage, W, rel,
                         ok ? "ok" : "MISMATCH");

      // Stopped after half the steps and saved; resumed at the next stage (another layout of the same file).
      const std::string dir = run_dir + "/stage" + std::to_string(stage);
      {
        zero::Engine first(engine_config(stage, adamw), model_groups(), comm, *ops, alloc);
        first.init_params(init);
        train(first, 0, kSteps / 2);
        zero::checkpoint::Checkpointer ckpt(first, {.run_dir = dir});
        ckpt.save({.step = kSteps / 2});
      }
      const int next = (stage + 1) % 4;
      zero::Engine second(engine_config(next, adamw), model_groups(), comm, *ops, alloc);
      zero::checkpoint::Checkpointer ckpt(second, {.run_dir = dir});
      const std::optional<std::string> latest = ckpt.resume_path("auto");
      const zero::checkpoint::LoadResult loaded = latest ? ckpt.load(*latest) : zero::checkpoint::LoadResult{};
      train(second, int(loaded.state.step), kSteps);
      const bool same = latest && loaded.state.step == kSteps / 2 && second.full_master(0) == fw &&
                        second.full_master(1) == fb;
      failures += !same;
      if (r == 0)
        printf("consumer: stage %d saved at step %lld, resumed at stage %d: %s\n", stage,
               static_cast<long long>(loaded.state.step), next, same ? "same bits as the run never stopped" : "MISMATCH");
    }
  }
  MPI_Finalize();
  return failures ? 1 : 0;
}
