// pmtrain's own training step against transformers: the fixture's 3 pairs as one global batch, spread
// over this world's ranks (a rank without a pair runs the collectives with zero gradients), 5 steps of
// pmtrain::train_step on the engine at stages 0-3 with the engine configured by pmtrain's own
// engine_config() from a config naming the fixture's optimizer (AdamW lr 1e-2, betas 0.9/0.95, eps 1e-8,
// weight decay 0.1 on every tensor, clip 1.0, constant LR). Losses, gradient norms and the final
// parameters must match the fixture's transformers + torch.optim.AdamW run (1e-4 relative). So pmtrain's
// parameter access, loss divisor, clipping and optimizer settings are checked from outside.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "comm/mpi_communicator.h"
#include "model/param_layout.h"
#include "pmtrain/train_step.h"
#include "tests/pmtrain/fixture_engine.h"

namespace zero::pmtrain {
namespace {

TEST(PmtrainStep, FiveStepsMatchTransformersAtEveryStage) {
  using namespace model;
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config qc = load_hf_config(testing::fixture_dir() + "/config.json");
  const testing::FixtureBatch fb = testing::fixture_batch(reader);
  const std::vector<float> ref_losses = reader.read_f32("train.losses");
  const std::vector<float> ref_norms = reader.read_f32("train.grad_norms");
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int W = comm.world(), r = comm.rank();
  const int64_t pairs = int64_t(fb.seqs.size()) / 2;
  const std::vector<std::vector<int32_t>> mine = rank_pairs(fb, W, r);
  const Config cfg = parse_config(
      "optim:\n  lr: 1.0e-2\n  beta1: 0.9\n  beta2: 0.95\n  eps: 1.0e-8\n  weight_decay: 0.1\n  clip_norm: 1.0\n"
      "  schedule: constant\n  warmup_ratio: 0\nmodel:\n  decay_norms: true\n  decay_embedding: true\n",
      "fixture_step.yaml");
  for (int stage = 0; stage <= 3; ++stage) {
    Config c = cfg;
    c.zero.stage = stage;
    c.zero.bucket_elements = 4096;  // several buckets; the embedding (47856 elements) in pieces
    const Qwen3RewardModel model(qc);
    FixtureEngine fe(c, model, comm, reader);
    Engine& engine = fe.engine;
    EngineParamAccess& access = fe.access;
    for (int step = 1; step <= 5; ++step) {
      PairStats local;
      const StepResult res = train_step(
          engine, model, access, 1,
          [&](size_t) -> std::optional<data::PairBatch> {
            if (mine.empty()) return std::nullopt;
            return testing::padded_batch(mine, 0, fb.row_len);
          },
          pairs, local);
      double loss = local.loss_sum;
      comm.all_reduce_scalars(&loss, 1, ReduceOp::Sum);
      loss /= double(pairs);
      EXPECT_TRUE(res.applied);
      EXPECT_NEAR(loss, ref_losses[step - 1], 1e-4 * ref_losses[step - 1]) << "stage " << stage << " step " << step;
      EXPECT_NEAR(res.grad_norm, ref_norms[step - 1], 1e-4 * ref_norms[step - 1]) << "stage " << stage << " step " << step;
    }
    for (int g = 0; g < int(model.groups().size()); ++g) {
      const std::vector<float> full = engine.full_master(g);
      size_t at = 0;
      for (const TensorSpec& t : model.groups()[g].tensors) {
        const std::vector<float> ref = reader.read_f32("final." + t.name);
        const testing::Err e = testing::compare({full.data() + at, size_t(t.numel())}, ref, 1e-5, 1e-4);
        EXPECT_LT(e.norm_rel, 1e-4) << "stage " << stage << " " << t.name;
        at += size_t(t.numel());
      }
    }
  }
}

}  // namespace
}  // namespace zero::pmtrain
