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

#include <array>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "comm/mpi_communicator.h"
#include "core/step_clock.h"
#include "pmtrain/train_step.h"
#include "tests/pmtrain/fixture_engine.h"

namespace zero::pmtrain {
namespace {

// Timestamps 0, 1, 3, 6, 10, ... seconds (gap i = i + 1): each gap's owner is visible in the totals.
class FakeClock final : public StepClock {
 public:
  FakeClock() : StepClock(true) {}

 protected:
  void record(size_t i) override { recorded = i + 1; }
  void resolve(std::span<double> gaps) override {
    EXPECT_EQ(gaps.size() + 1, recorded);
    for (size_t i = 0; i < gaps.size(); ++i) gaps[i] = double(i + 1);
  }
  uint64_t launches_now() const override { return launched; }

 public:
  size_t recorded = 0;
  uint64_t launched = 0;  // the test's "device work queued so far"
};

const char* const kNorm = "rmsnorm_forward";
const char* const kGemm = "linear_forward";

// Each op gets the launches queued inside its own scopes (a nested op's are its own, as its time is), summed
// over calls and windows; work queued between scopes belongs to no op.
TEST(StepClock, LaunchesCountedPerOpExclusively) {
  FakeClock clock;
  clock.launched = 100;  // launched before the window: nobody's
  clock.enter(TimeCategory::Gemm, kGemm);
  clock.launched += 3;
  clock.enter(TimeCategory::Elementwise, kNorm);
  clock.launched += 5;
  clock.leave();
  clock.launched += 1;
  clock.leave();
  clock.launched += 7;  // between scopes
  clock.enter(TimeCategory::Elementwise, kNorm);
  clock.launched += 2;
  clock.leave();
  StepTimes t = clock.take();
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].name, kGemm);
  EXPECT_EQ(t.ops[0].launches, 3u + 1u);
  EXPECT_EQ(t.ops[1].launches, 5u + 2u);
  clock.enter(TimeCategory::Elementwise, kNorm);
  clock.launched += 4;
  clock.leave();
  t += clock.take();
  EXPECT_EQ(t.ops[1].launches, 5u + 2u + 4u);
  HostStepClock host;  // counts none
  host.enter(TimeCategory::Gemm, kGemm);
  host.leave();
  EXPECT_EQ(host.take().ops.at(0).launches, 0u);
}

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

// Beside the device's literal gaps, each scope gets the host's own time in it (the time spent issuing its work):
// a scope that sleeps holds at least its sleep on the host's side, whatever the device's timestamps say, in its
// category and its op; and windows add up.
TEST(StepClock, HostTimeInEachScopeBesideTheDevices) {
  using namespace std::chrono_literals;
  const auto sleep_s = [](auto d) { return std::chrono::duration<double>(d).count(); };
  FakeClock clock;
  const auto t0 = std::chrono::steady_clock::now();
  clock.enter(TimeCategory::Elementwise, kNorm);  // device t=0
  std::this_thread::sleep_for(30ms);
  clock.enter(TimeCategory::Comm);  // t=1
  std::this_thread::sleep_for(20ms);
  clock.leave();  // t=3
  clock.leave();  // t=6
  clock.enter(TimeCategory::Gemm, kGemm);  // t=10
  clock.leave();  // t=15
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  StepTimes t = clock.take();
  EXPECT_TRUE(t.device_timed);
  EXPECT_EQ(t.of(TimeCategory::Elementwise), 1.0 + 3.0);  // the device's, as before
  EXPECT_GE(t.host_of(TimeCategory::Elementwise), sleep_s(30ms));
  EXPECT_GE(t.host_of(TimeCategory::Comm), sleep_s(20ms));
  EXPECT_LT(t.host_of(TimeCategory::Elementwise) + t.host_of(TimeCategory::Comm) + t.host_of(TimeCategory::Gemm),
            wall);
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].name, kNorm);
  EXPECT_EQ(t.ops[0].host_seconds, t.host_of(TimeCategory::Elementwise));  // the norm's scopes are all of it
  EXPECT_EQ(t.ops[1].host_seconds, t.host_of(TimeCategory::Gemm));
  EXPECT_EQ(t.host_of(TimeCategory::Optimizer), 0.0);  // never entered
  clock.enter(TimeCategory::Elementwise, kNorm);
  std::this_thread::sleep_for(10ms);
  clock.leave();
  const double before = t.ops[0].host_seconds;
  t += clock.take();
  EXPECT_GE(t.ops[0].host_seconds, before + sleep_s(10ms));
  EXPECT_GE(t.host_of(TimeCategory::Elementwise), before + sleep_s(10ms));
  // The host clock's two times are one: its device is the host.
  HostStepClock host;
  host.enter(TimeCategory::Gemm, kGemm);
  std::this_thread::sleep_for(10ms);
  host.leave();
  const StepTimes h = host.take();
  EXPECT_FALSE(h.device_timed);
  EXPECT_GE(h.of(TimeCategory::Gemm), sleep_s(10ms));
  EXPECT_EQ(h.of(TimeCategory::Gemm), h.host_of(TimeCategory::Gemm));
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
        // Backward: one linear_backward (its two GEMMs) for each of the four.
        const uint64_t recompute = ckpt == ActivationCheckpointing::Full ? 1 : 0;
        const uint64_t rematerialised = ckpt == ActivationCheckpointing::Selective ? 5 : 0;
        EXPECT_EQ(t.calls_of(TimeCategory::Gemm), L * (4 + 4 + 4 * recompute));
        EXPECT_EQ(t.calls_of(TimeCategory::Attention), L * (1 + 1));
        const uint64_t pieces = uint64_t(engine.num_pieces(0));  // the embedding group, split
        EXPECT_GT(pieces, 1u);
        EXPECT_EQ(t.calls_of(TimeCategory::Elementwise),
                  L * (7 + 7 + 7 * recompute + rematerialised) + 2 * pieces + 2 + 1);
        // Named ops: every GEMM, attention and element-wise scope is a model op's, so their calls add up to the
        // three categories'; the layer's ops once a layer each way (and again when recomputed). The engine names
        // pieces of its gradient work and step inside its own scopes, which stay unnamed.
        std::array<uint64_t, kTimeCategories> named{};
        std::map<std::string, OpTime> op;
        for (const OpTime& o : t.ops) named[size_t(o.category)] += o.calls, op[o.name] = o;
        auto unnamed = [&](TimeCategory c) { return t.calls_of(c) - named[size_t(c)]; };
        EXPECT_EQ(unnamed(TimeCategory::Gemm) + unnamed(TimeCategory::Attention) + unnamed(TimeCategory::Elementwise), 0u);
        EXPECT_EQ(op["attention_backward"].calls, L);
        EXPECT_EQ(op["attention_forward"].calls, L);
        EXPECT_EQ(op["swiglu_backward"].calls, L);
        EXPECT_EQ(op["pair_loss"].calls, 1u);
        // The work the model's ops declare, from the config's shapes and this rank's tokens by hand (fp32 on the
        // CPU): the SwiGLU product reads gate and up and writes its output (again when recomputed); attention
        // scores each causal query-key pair (4 q_dim FLOPs forward, 10 backward); the projections' GEMMs take
        // 2 FLOPs a weight a token each way (the forward again under full recompute).
        double T = 0, scores = 0;
        for (const std::vector<int32_t>& seq : mine) T += double(seq.size()), scores += double(seq.size()) * double(seq.size() + 1) / 2;
        const double H = double(qc.hidden_size), I = double(qc.intermediate_size), qd = double(qc.q_dim()),
                     kd = double(qc.kv_dim()), layers = double(L);
        const double weights = H * (qd + 2 * kd) + qd * H + H * 2 * I + I * H;  // q/k/v, o, gate/up, down
        EXPECT_EQ(op["swiglu_forward"].work.bytes, 3 * 4 * I * T * layers * (ckpt == ActivationCheckpointing::None ? 1 : 2));
        EXPECT_DOUBLE_EQ(op["attention_forward"].work.flops, 4 * qd * scores * layers);
        EXPECT_DOUBLE_EQ(op["attention_backward"].work.flops, 10 * qd * scores * layers);
        EXPECT_DOUBLE_EQ(op["linear_forward"].work.flops + op["linear_forward_add"].work.flops,
                         2 * T * weights * layers * double(1 + recompute));
        EXPECT_DOUBLE_EQ(op["linear_backward"].work.flops, 4 * T * weights * layers);  // input and weight grads

        uint64_t grad_units = 0;
        const uint64_t G = engine.groups().size();
        for (uint64_t g = 0; g < G; ++g) grad_units += uint64_t(engine.num_pieces(int(g)));
        EXPECT_EQ(unnamed(TimeCategory::GradBuckets), 2 * grad_units);
        EXPECT_EQ(unnamed(TimeCategory::Optimizer), 1u);
        // The engine's named work: each gradient unit's finite count (nan_guard), the norm over each group's
        // optimizer shard (stage 0: rank 0 alone), AdamW once a group over this rank's part of its real elements
        // (every tensor of the reward model decays alike: a run of tensors is one call).
        EXPECT_EQ(op["finite_count"].category, TimeCategory::GradBuckets);
        EXPECT_EQ(op["finite_count"].calls, grad_units);
        EXPECT_EQ(op["grad_norm"].calls, stage != 0 || r == 0 ? G : 0u);
        EXPECT_EQ(op["adamw"].category, TimeCategory::Optimizer);
        uint64_t groups_here = 0;  // groups with real elements (not only padding) in this rank's shard
        for (uint64_t g = 0; g < G; ++g) {
          const OptimizerShard sh = engine.optimizer_shard(int(g));
          groups_here += sh.count > 0 && sh.begin < engine.partition().groups[g].numel ? 1 : 0;
        }
        EXPECT_EQ(op["adamw"].calls, groups_here);
        // The one micro-step of a step writes the accumulator where an add would read it too, and nothing clears it
        // after the step: the fold moves each padded element once each way, 4 bytes read and 4 written in fp32.
        EXPECT_EQ(op.count("zero_accumulators"), 0u);
        if (stage < 2 || W == 1)
          EXPECT_EQ(op["accumulate"].work.bytes, 8.0 * double(engine.partition().total_padded));
        else
          EXPECT_EQ(op.count("accumulate"), 0u);  // the reduced chunks fold as they arrive (reduced_fold)
        // AdamW's declared bytes: 28 an element (the fp32 gradient read; master, m and v read and written), over
        // every parameter on every rank at stage 0, over the shards (summed across the ranks) at stages 1-3.
        double params = 0, adamw_bytes = op["adamw"].work.bytes;
        for (const GroupSpec& g : qwen3_rm_groups(qc))
          for (const TensorSpec& ts : g.tensors) params += double(ts.numel());
        if (stage != 0) MPI_Allreduce(MPI_IN_PLACE, &adamw_bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        EXPECT_EQ(adamw_bytes, 28 * params);
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
