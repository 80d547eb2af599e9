// The step-time breakdown (core/step_clock.h) as pmtrain takes it: one real training step of the fixture
// model on the engine (pmtrain::train_step, the Trainer's own step) at stages 0-3, with and without
// activation checkpointing. Every category must have been entered exactly as often as the model's
// structure and the engine's collectives imply, counted here independently of the code under test:
//   per decoder layer, forward: 7 linear layers (q, k, v, o, gate, up, down), 1 attention, 7 element-wise
//   ops (2 RMSNorms, q-norm+RoPE, k-norm+RoPE, SwiGLU, 2 residual adds); backward: 7 input and 7 weight
//   gradients, 1 attention backward, the 7 element-wise backwards; checkpointing recomputes each layer's
//   forward in backward. Per micro-batch: the embedding forward and backward once per piece the engine
//   hands out, the pooled head forward and backward, the pair loss.
//   Engine: one optimizer step; grad_view + grad_ready per whole group and grad_piece + piece_ready per
//   piece of a split one; comm: the start and the wait of each bucket reduction and stage-3 gather (the
//   collectives read from the communicator's own counters), the stage 1-2 all-gathers' starts and one wait
//   for them all, one per scalar reduction.
// The seconds must be non-negative and sum to no more than the step's wall time. A fake clock with
// literal timestamps checks that nested scopes count exclusively.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <map>
#include <string>

#include "comm/mpi_communicator.h"
#include "core/step_clock.h"
#include "pmtrain/train_step.h"
#include "tests/pmtrain/fixture_engine.h"

namespace zero::pmtrain {
namespace {

// Timestamps 0, 1, 3, 6, 10, ... seconds (gap i = i + 1): each gap's owner is visible in the totals.
class FakeClock final : public StepClock {
 protected:
  void record(size_t i) override { recorded = i + 1; }
  void resolve(std::span<double> gaps) override {
    EXPECT_EQ(gaps.size() + 1, recorded);
    for (size_t i = 0; i < gaps.size(); ++i) gaps[i] = double(i + 1);
  }

 public:
  size_t recorded = 0;
};

TEST(StepClock, NestedScopesCountExclusively) {
  FakeClock clock;
  clock.enter(TimeCategory::Optimizer);    // t=0
  clock.enter(TimeCategory::Comm);         // t=1
  clock.leave();                           // t=3
  clock.leave();                           // t=6
  clock.enter(TimeCategory::Gemm);         // t=10 (6..10 is nobody's: other)
  clock.leave();                           // t=15
  const StepTimes t = clock.take();
  EXPECT_EQ(t.of(TimeCategory::Optimizer), 1.0 + 3.0);
  EXPECT_EQ(t.of(TimeCategory::Comm), 2.0);
  EXPECT_EQ(t.of(TimeCategory::Gemm), 5.0);
  EXPECT_EQ(t.total(), 11.0);
  EXPECT_EQ(t.calls_of(TimeCategory::Optimizer), 1u);
  EXPECT_EQ(t.calls_of(TimeCategory::Comm), 1u);
  EXPECT_EQ(t.calls_of(TimeCategory::Gemm), 1u);
  EXPECT_EQ(t.calls_of(TimeCategory::Attention), 0u);
  // A new window starts empty.
  const StepTimes empty = clock.take();
  EXPECT_EQ(empty.total(), 0.0);
  EXPECT_EQ(empty.calls_of(TimeCategory::Gemm), 0u);
}

// Named scopes also count to their op: the innermost named scope owns the time, an unnamed scope inside a named
// one leaves it to its category only; windows add up op by op.
const char* const kNorm = "rmsnorm_forward";
const char* const kGemm = "linear_forward";
TEST(StepClock, NamedScopesCountToTheirOp) {
  FakeClock clock;
  clock.enter(TimeCategory::Gemm, kGemm);         // t=0
  clock.enter(TimeCategory::Elementwise, kNorm);  // t=1
  clock.leave();                                  // t=3
  clock.enter(TimeCategory::Comm);                // t=6: unnamed, inside gemm
  clock.leave();                                  // t=10
  clock.leave();                                  // t=15
  clock.enter(TimeCategory::Elementwise, kNorm);  // t=21 (15..21: nobody's)
  clock.leave();                                  // t=28
  StepTimes t = clock.take();
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].name, kGemm);
  EXPECT_EQ(t.ops[0].seconds, 1.0 + 3.0 + 5.0);  // 0..1, 3..6, 10..15
  EXPECT_EQ(t.ops[0].calls, 1u);
  EXPECT_EQ(t.ops[1].name, kNorm);
  EXPECT_EQ(t.ops[1].seconds, 2.0 + 7.0);
  EXPECT_EQ(t.ops[1].calls, 2u);
  EXPECT_EQ(t.of(TimeCategory::Comm), 4.0);
  clock.enter(TimeCategory::Elementwise, kNorm);
  clock.leave();
  t += clock.take();
  EXPECT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[1].seconds, 2.0 + 7.0 + 1.0);
  EXPECT_EQ(t.ops[1].calls, 3u);
  EXPECT_TRUE(clock.take().ops.empty());  // a new window starts empty
}

TEST(StepClock, TakeInsideAScopeIsAnError) {
  HostStepClock clock;
  clock.enter(TimeCategory::Gemm);
  EXPECT_THROW(clock.take(), Error);
  clock.leave();
  EXPECT_THROW(clock.leave(), Error);
}

TEST(StepClock, EveryOpOfARealStepIsCountedInItsCategory) {
  using namespace model;
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config qc = load_hf_config(testing::fixture_dir() + "/config.json");
  const testing::FixtureBatch fb = testing::fixture_batch(reader);
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int W = comm.world(), r = comm.rank();
  const int64_t pairs = int64_t(fb.seqs.size()) / 2;
  ASSERT_LE(W, pairs) << "every rank needs a pair (a rank without one runs empty_micro_step)";
  const std::vector<std::vector<int32_t>> mine = rank_pairs(fb, W, r);

  const uint64_t L = uint64_t(qc.num_layers);
  using model::ActivationCheckpointing;
  for (ActivationCheckpointing ckpt :
       {ActivationCheckpointing::None, ActivationCheckpointing::Selective, ActivationCheckpointing::Full})
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage << " checkpointing " << int(ckpt));
      Config c;
      c.zero.stage = stage;
      c.zero.bucket_elements = 4096;  // several buckets; the embedding (47856 elements) in pieces
      RewardModelOptions mo;
      mo.activation_checkpointing = ckpt;
      const Qwen3RewardModel model(qc, mo);
      FixtureEngine fe(c, model, comm, reader);
      Engine& engine = fe.engine;
      EngineParamAccess& access = fe.access;
      HostStepClock clock;
      engine.set_step_clock(&clock);
      model.ops().set_step_clock(&clock);

      for (int step = 0; step < 2; ++step) {  // the second step reuses the clock's storage
        comm.reset_report();
        PairStats local;
        const auto t0 = std::chrono::steady_clock::now();
        const StepResult res = train_step(
            engine, model, access, 1,
            [&](size_t) -> std::optional<data::PairBatch> { return testing::padded_batch(mine, 0, fb.row_len); },
            pairs, local);
        const StepTimes t = clock.take();
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_TRUE(res.applied);

        // Full recomputes a layer's forward but its attention, whose output it keeps (4 GEMMs: q, k and v as one, o,
        // gate and up as one, down; 7 element-wise ops, the two residual adds among them, inside o's and down's GEMM
        // scopes on the CPU);
        // selective only its two input norms, q/k norm + RoPE and the SwiGLU product (5 element-wise ops).
        // Backward: two GEMMs for each of the four.
        const uint64_t recompute = ckpt == ActivationCheckpointing::Full ? 1 : 0;
        const uint64_t rematerialised = ckpt == ActivationCheckpointing::Selective ? 5 : 0;
        EXPECT_EQ(t.calls_of(TimeCategory::Gemm), L * (4 + 8 + 4 * recompute));
        EXPECT_EQ(t.calls_of(TimeCategory::Attention), L * (1 + 1));
        const uint64_t pieces = uint64_t(engine.num_pieces(0));  // the embedding group, split
        EXPECT_GT(pieces, 1u);
        EXPECT_EQ(t.calls_of(TimeCategory::Elementwise),
                  L * (7 + 7 + 7 * recompute + rematerialised) + 2 * pieces + 2 + 1);
        // The model's ops by name: every GEMM, attention and element-wise scope is a named op's, so their calls
        // add up to the three categories'; the layer's ops once a layer each way (and again when recomputed).
        uint64_t named = 0;
        std::map<std::string, uint64_t> op_calls;
        for (const OpTime& op : t.ops) named += op.calls, op_calls[op.name] = op.calls;
        EXPECT_EQ(named, t.calls_of(TimeCategory::Gemm) + t.calls_of(TimeCategory::Attention) +
                             t.calls_of(TimeCategory::Elementwise));
        EXPECT_EQ(op_calls["attention_backward"], L);
        EXPECT_EQ(op_calls["attention_forward"], L);
        EXPECT_EQ(op_calls["swiglu_backward"], L);
        EXPECT_EQ(op_calls["pair_loss"], 1u);

        uint64_t grad_units = 0;
        const uint64_t G = engine.groups().size();
        for (uint64_t g = 0; g < G; ++g) grad_units += uint64_t(engine.num_pieces(int(g)));
        EXPECT_EQ(t.calls_of(TimeCategory::GradBuckets), 2 * grad_units);
        EXPECT_EQ(t.calls_of(TimeCategory::Optimizer), 1u);
        const CommReport& rep = comm.report();
        const uint64_t gathers = rep.of(Collective::AllGather).calls;
        // Each bucket reduction and gather: its start and its wait; the stage 1-2 all-gathers: each start,
        // one wait for all; each (blocking) scalar reduction: one.
        const uint64_t comm_scopes = 2 * (rep.of(Collective::AllReduce).calls + rep.of(Collective::ReduceScatter).calls) +
                                     (stage == 3 ? 2 * gathers : gathers + (gathers > 0 ? 1 : 0)) +
                                     rep.of(Collective::ScalarAllReduce).calls;
        EXPECT_EQ(t.calls_of(TimeCategory::Comm), comm_scopes);
        // Stage 3 gathers every unit in forward and the whole groups again in backward (one rank: none, its
        // shards read in place); stages 1-2 gather each group once after the step.
        if (stage == 3) {
          EXPECT_EQ(gathers, W > 1 ? (G - 1 + pieces) + (G - 1) : 0u);
        } else if (stage == 1 || stage == 2) {
          EXPECT_EQ(gathers, G);
        }

        for (size_t k = 0; k < kTimeCategories; ++k)
          EXPECT_GE(t.seconds[k], 0.0) << time_category_name(TimeCategory(k));
        EXPECT_GT(t.of(TimeCategory::Gemm), 0.0);
        EXPECT_LE(t.total(), wall);
      }
    }
}

}  // namespace
}  // namespace zero::pmtrain
