// Communication is measured at the MPI boundary (PMPI wrapper) and must equal comm_report() and the
// ZeRO counts per optimizer step with accumulation k and Psi the padded parameter count:
// stage 0 and 1: 2 Psi; stage 2: (k + 1) Psi; stage 3: 3k Psi; no other MPI call moves any data. One rank
// reduces nothing (each gradient is added into its accumulator where it lies) and gathers nothing at stage 3.
// Stage 2 must launch reduce-scatters while backward is still running.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/common/pmpi_counter.h"
#include "tests/engine/engine_harness.h"

using namespace zero;
using namespace zero::testing;

namespace {
size_t padded_psi(const std::vector<GroupInfo>& groups, size_t W) {
  size_t psi = 0;
  for (const auto& g : groups) psi += ((g.numel() + W - 1) / W + 63) / 64 * 64 * W;  // 64-element shards
  return psi;
}
}  // namespace

class EngineComm : public ::testing::TestWithParam<int> {};

TEST_P(EngineComm, ElementsPerStepMatchFormulaAndMpiBoundary) {
  const int stage = GetParam();
  const int k = 3;
  Harness h(base_config(stage, k));
  const uint64_t W = h.world();
  const uint64_t psi = padded_psi(h.model.groups(), W);
  example::MlpDataset data(64, h.model.input_dim(), 5);
  const int steps = 2;
  h.comm->reset_report();
  pmpi_reset();
  example::train_with_engine(h.model, *h.engine, data, int64_t(2 * k * W), 2, steps);
  const CommReport& rep = h.engine->comm_report();
  const uint64_t ar = rep.of(Collective::AllReduce).elements, rs = rep.of(Collective::ReduceScatter).elements,
                 ag = rep.of(Collective::AllGather).elements;
  // Stage 3 gathers each group twice a micro-step (forward, backward), except on one rank, which reads its
  // shard, the whole group, in place. One rank's reductions would change nothing (fp32 throughout): none.
  const uint64_t gathers = W > 1 ? 2 * k * psi : 0, reduced = W > 1 ? 1 : 0;
  const uint64_t expect_per_step =
      stage == 0 ? reduced * 2 * psi : stage == 1 ? (reduced + 1) * psi : stage == 2 ? (reduced * k + 1) * psi
                                                                        : reduced * k * psi + gathers;
  EXPECT_EQ(rep.bulk_elements(), steps * expect_per_step);
  switch (stage) {
    case 0: EXPECT_EQ(ar, steps * reduced * 2 * psi); EXPECT_EQ(rs + ag, 0u); break;
    case 1: EXPECT_EQ(rs, steps * reduced * psi); EXPECT_EQ(ag, steps * psi); EXPECT_EQ(ar, 0u); break;
    case 2: EXPECT_EQ(rs, steps * reduced * k * psi); EXPECT_EQ(ag, steps * psi); EXPECT_EQ(ar, 0u); break;
    case 3: EXPECT_EQ(rs, steps * reduced * k * psi); EXPECT_EQ(ag, steps * gathers); EXPECT_EQ(ar, 0u); break;
  }
  // What MPI itself was handed: all-reduce count x 2, reduce-scatter recvcount x W, all-gather x W. The
  // scalar reductions are MPI_Iallreduce calls too (every wait is polled under the peer timeout), with
  // their scalars counted apart.
  const uint64_t scalars = rep.of(Collective::ScalarAllReduce).elements;
  EXPECT_EQ(rep.of(Collective::ScalarAllReduce).calls, uint64_t(2 * steps));
  if (W == 1) {  // one rank: every collective is a local copy, nothing reaches MPI
    EXPECT_TRUE(pmpi_counts().empty());
    return;
  }
  EXPECT_EQ(2 * pmpi_count("MPI_Iallreduce").count_args, ar + 2 * scalars);
  EXPECT_EQ(pmpi_count("MPI_Ireduce_scatter_block").count_args * W, rs);
  EXPECT_EQ(pmpi_count("MPI_Iallgather").count_args * W, ag);
  // Reductions go out in chunks of at most a bucket (a group larger than a bucket too): one MPI message of
  // a whole large group ran ~20x slower per byte on shared memory than messages of a few MB.
  const uint64_t bucket = h.engine->config().bucket_elements;
  EXPECT_LE(pmpi_count("MPI_Iallreduce").max_count_arg, bucket);
  EXPECT_LE(pmpi_count("MPI_Ireduce_scatter_block").max_count_arg * W, bucket);
  // And nothing else moved data: every data-moving MPI call of the window (point-to-point, any
  // collective, one-sided) is one of the stage's collectives or a scalar reduction (norm + finite flag,
  // and the loss log: one each per step), as many calls as the engine reports.
  std::map<std::string, uint64_t> calls, expected = {{"MPI_Iallreduce", uint64_t(2 * steps)}};
  for (const auto& [function, n] : pmpi_counts()) calls[function] = n.calls;
  if (stage == 0) {
    expected["MPI_Iallreduce"] += rep.of(Collective::AllReduce).calls;
  } else {
    expected["MPI_Ireduce_scatter_block"] = rep.of(Collective::ReduceScatter).calls;
    expected["MPI_Iallgather"] = rep.of(Collective::AllGather).calls;
  }
  EXPECT_EQ(calls, expected);
}

INSTANTIATE_TEST_SUITE_P(Stages, EngineComm, ::testing::Values(0, 1, 2, 3));

namespace {
// Watches the collective log at the moment backward hands in the last group's gradient.
class WatchingParams final : public example::MlpParams {
 public:
  WatchingParams(Engine& e) : inner_(e), e_(e) {}
  std::vector<std::vector<float>> load(int g) override { return inner_.load(g); }
  void done(int g) override { inner_.done(g); }
  void begin_backward() override { inner_.begin_backward(); }
  void store_grad(int g, const std::vector<std::vector<float>>& grads) override {
    if (g == 0) reduce_scatters_before_last_group = e_.comm_report().of(Collective::ReduceScatter).calls;
    inner_.store_grad(g, grads);
  }
  uint64_t reduce_scatters_before_last_group = 0;

 private:
  example::EngineMlpParams inner_;
  Engine& e_;
};
}  // namespace

TEST(EngineOverlap, Stage2LaunchesReduceScattersDuringBackward) {
  EngineConfig cfg = base_config(2, 1);
  cfg.bucket_elements = 64;
  Harness h(cfg);
  if (h.world() == 1) GTEST_SKIP() << "one rank reduces nothing (reductions_in_place)";
  h.comm->reset_report();
  h.comm->set_logging(true);
  example::MlpDataset data(16, h.model.input_dim(), 5);
  WatchingParams watch(*h.engine);
  h.engine->begin_micro_step();
  h.model.forward_backward(watch, data.x.data(), data.t.data(), 4);
  const size_t buckets = h.engine->partition().buckets.size();
  ASSERT_GE(buckets, 3u);
  // Every bucket but the one holding group 0 was already on the wire (in one or more chunks) before
  // group 0's gradient existed, and group 0's bucket went out after it.
  const auto& log = h.comm->log();
  EXPECT_GE(watch.reduce_scatters_before_last_group, buckets - 1);
  EXPECT_LT(watch.reduce_scatters_before_last_group, log.size());
  for (const auto& e : log) EXPECT_EQ(e.op, Collective::ReduceScatter);
  h.engine->step(4.0 * h.world());
}
