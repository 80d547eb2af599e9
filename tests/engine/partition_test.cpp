// Partition arithmetic (padding, buckets) and the batch contract, without MPI.
#include <gtest/gtest.h>

#include "core/check.h"
#include "zero/buffer_plan.h"
#include "zero/comm_plan.h"
#include "zero/engine_config.h"
#include "zero/partition.h"

using namespace zero;

TEST(Partition, PadsEveryGroupToEqualShards) {
  std::vector<GroupInfo> groups = {{"embed", {{"e", 997 * 48}}}, {"norm", {{"n", 5}}}, {"head", {{"w", 48}, {"b", 1}}}};
  for (int W : {1, 2, 3, 5, 7, 8}) {
    Partition p = make_partition(groups, W, 1000);
    size_t padded = 0;
    for (const auto& g : p.groups) {
      EXPECT_EQ(g.shard, ((g.numel + W - 1) / W + 63) / 64 * 64);  // 64-element (256-byte fp32) shards
      EXPECT_EQ(g.padded, g.shard * W);
      EXPECT_GE(g.padded, g.numel);
      EXPECT_LT(g.padded - g.numel, size_t(64 * W));
      EXPECT_EQ(g.pieces, 1);  // nothing here is splittable
      EXPECT_EQ(g.full_offset, padded);
      padded += g.padded;
    }
    EXPECT_EQ(p.total_padded, padded);
    EXPECT_EQ(p.total_shard * W, padded);
  }
  // A 5-element norm weight on 8 ranks: one aligned block of 64 per rank, almost all padding.
  Partition p8 = make_partition(groups, 8, 1000);
  EXPECT_EQ(p8.groups[1].shard, 64u);
  EXPECT_EQ(p8.groups[1].padded, 512u);
}

TEST(Partition, SplittableGroupsLargerThanABucketComeInPiecesOfAtMostABucket) {
  // An embedding of 151936 x 16 and a small layer; buckets of 20000 elements.
  std::vector<GroupInfo> groups = {{"embed", {{"e", 151936 * 16}}, true}, {"layer", {{"w", 3000}}}, {"small", {{"s", 50}}, true}};
  for (int W : {1, 2, 3, 4, 8}) {
    const Partition p = make_partition(groups, W, 20000);
    const GroupLayout& e = p.groups[0];
    const size_t c = 20000 / W / 64 * 64;  // piece elements per rank
    EXPECT_EQ(e.piece, c) << W;
    EXPECT_EQ(e.pieces, int((e.shard + c - 1) / c)) << W;
    EXPECT_GT(e.pieces, 1);
    size_t covered = 0;
    for (int k = 0; k < e.pieces; ++k) {
      EXPECT_EQ(e.piece_begin(k), covered);
      EXPECT_LE(e.piece_len(k) * W, 20000u);
      covered += e.piece_len(k);
    }
    EXPECT_EQ(covered, e.shard);
    EXPECT_EQ(p.groups[2].pieces, 1);  // splittable but smaller than a bucket: whole
    // Nothing staged or gathered at once is larger than a bucket, though the embedding is 121x one.
    EXPECT_LE(p.max_staged, 20000u);
    EXPECT_LE(p.max_unit_padded, 20000u);
    EXPECT_EQ(p.max_group_padded, e.padded);
  }
}

TEST(Partition, APieceNeverOutrunsTheReductionChunk) {
  // A piece is at least 64 elements a rank, so with buckets under 64 elements a rank it is larger than the
  // bucket's share; it is reduce-scattered whole, so the engine's send / recv chunk must hold it.
  std::vector<GroupInfo> groups = {{"embed", {{"e", 3000}}, true}, {"layer", {{"w", 300}}}};
  for (int W = 1; W <= 8; ++W)
    for (size_t bucket : {1, 64, 100, 128, 255, 1000}) {
      const Partition p = make_partition(groups, W, bucket);
      const GroupLayout& e = p.groups[0];
      ASSERT_TRUE(e.split()) << W << " " << bucket;
      EXPECT_GE(e.piece, 64u);
      EXPECT_EQ(p.max_piece, e.piece);
      EngineConfig cfg;
      cfg.bucket_elements = bucket;
      for (int stage = 0; stage <= 3; ++stage) {
        cfg.stage = stage;
        const BufferPlan b = plan_buffers(cfg, p);
        EXPECT_GE(b.chunk, e.piece) << "world " << W << ", bucket " << bucket << ", stage " << stage;
        EXPECT_GE(b.staging, e.unit_padded());
      }
    }
  // Without a split group the chunk is the bucket's share, as before.
  const Partition whole = make_partition({{"w", {{"w", 300}}}}, 3, 128);
  EXPECT_EQ(whole.max_piece, 0u);
  EngineConfig cfg;
  cfg.bucket_elements = 128;
  EXPECT_EQ(plan_buffers(cfg, whole).chunk, 128u / 3);
}

TEST(Partition, BucketsFormInBackwardOrderAndBigGroupsStandAlone) {
  std::vector<GroupInfo> groups = {{"a", {{"a", 500}}}, {"b", {{"b", 40}}}, {"c", {{"c", 30}}}, {"d", {{"d", 20}}}};
  Partition p = make_partition(groups, 1, 200);
  ASSERT_EQ(p.buckets.size(), 2u);
  EXPECT_EQ(p.buckets[0].groups, (std::vector<int>{1, 2, 3}));  // d, c, b (64 padded each) fit in 200
  EXPECT_EQ(p.buckets[1].groups, (std::vector<int>{0}));        // a is bigger than a bucket
  EXPECT_EQ(p.max_bucket_padded, 512u);
  EXPECT_EQ(p.groups[0].bucket, 1);
  EXPECT_EQ(p.groups[3].bucket, 0);
}

// Hybrid sharding over 4 groups of 2 ranks with a bf16 wire and an fp32 accumulator: the replicas' all-reduce goes
// through two chunks of its own in bf16, worked by hand for groups of 6400 and 3200 elements in one bucket (Psi
// 9600, a rank's chunk 4800): a rank's chunk at stages 2-3, the group's 9600 at stages 0-1; 2 (R - 1) / R of the
// owned range on the link, 2 bytes an element (stage 2: 2 x 3/4 x 4800 x 2). An fp32 wire: in place, 4 bytes.
TEST(BufferPlan, ReplicasReduceInTheReduceDtypeThroughChunksOfTheirOwn) {
  const Partition part = make_partition({{"a", {{"w", 6400}}}, {"b", {{"w", 3200}}}}, 2, 1u << 20);
  EngineConfig cfg;
  cfg.reduce_dtype = DType::BF16;
  const size_t want_chunk[4] = {9600, 9600, 4800, 4800};
  for (int stage = 0; stage < 4; ++stage) {
    cfg.stage = stage;
    const BufferPlan alone = plan_buffers(cfg, part), hybrid = plan_buffers(cfg, part, 4);
    EXPECT_EQ(alone.replica_chunk, 0u) << stage;
    EXPECT_EQ(hybrid.replica_chunk, want_chunk[stage]) << stage;
    EXPECT_EQ(hybrid.bytes(MemCategory::CommBuffers) - alone.bytes(MemCategory::CommBuffers), 2 * want_chunk[stage] * 2)
        << stage;
  }
  cfg.stage = 2;
  EXPECT_DOUBLE_EQ(plan_step_traffic(cfg, part, 3, 4).replica_wire_bytes, 14400);
  cfg.reduce_dtype = DType::F32;
  EXPECT_EQ(plan_buffers(cfg, part, 4).replica_chunk, 0u);
  EXPECT_DOUBLE_EQ(plan_step_traffic(cfg, part, 3, 4).replica_wire_bytes, 28800);
}

// The wire bytes by the phase the engine issues them in (zero/comm_plan.h), worked by hand: two groups of
// 6400 and 3200 elements on 2 ranks (Psi 9600, a ring moves half), bf16 params, fp32 reductions, 3 micro-steps.
TEST(CommPlan, WireBytesByPhase) {
  const Partition part = make_partition({{"a", {{"w", 6400}}}, {"b", {{"w", 3200}}}}, 2, 1u << 20);
  ASSERT_EQ(part.total_padded, 9600u);
  EngineConfig cfg;
  cfg.param_dtype = DType::BF16;
  cfg.reduce_dtype = DType::F32;
  struct Want { double wire, forward, backward, last_backward, after_step; };
  const Want want[4] = {
      {38400, 0, 0, 38400, 0},          // stage 0: all-reduce 2 Psi x 4 B / 2, at the last backward
      {28800, 0, 0, 19200, 9600},       // stage 1: reduce-scatter Psi x 4 B / 2 there; all-gather Psi x 2 B / 2 after
      {67200, 0, 19200, 0, 9600},       // stage 2: the reduce-scatter in every backward
      {115200, 9600, 28800, 0, 0},      // stage 3: gather Psi for each forward, Psi again + reduce-scatter in backward
  };
  for (int stage = 0; stage < 4; ++stage) {
    cfg.stage = stage;
    const StepTraffic t = plan_step_traffic(cfg, part, 3);
    const Want& w = want[stage];
    EXPECT_DOUBLE_EQ(t.wire_bytes, w.wire) << stage;
    EXPECT_DOUBLE_EQ(t.forward_bytes, w.forward) << stage;
    EXPECT_DOUBLE_EQ(t.backward_bytes, w.backward) << stage;
    EXPECT_DOUBLE_EQ(t.last_backward_bytes, w.last_backward) << stage;
    EXPECT_DOUBLE_EQ(t.after_step_bytes, w.after_step) << stage;
  }
}

TEST(BatchContract, DerivesTheThirdAndRejectsInconsistentSets) {
  EXPECT_EQ(resolve_batch({128, 2, 0}, 8).accum, 8);
  EXPECT_EQ(resolve_batch({128, 0, 8}, 8).micro, 2);
  EXPECT_EQ(resolve_batch({0, 2, 8}, 8).global, 128);
  EXPECT_EQ(resolve_batch({128, 2, 8}, 8).global, 128);
  auto msg = [](BatchSpec s, int w) {
    try {
      resolve_batch(s, w);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg({128, 2, 4}, 8).find("inconsistent"), std::string::npos);
  EXPECT_NE(msg({100, 2, 0}, 8).find("not divisible"), std::string::npos);
  EXPECT_NE(msg({128, 0, 0}, 8).find("at least two"), std::string::npos);
  EXPECT_NE(msg({128, 3, 0}, 3).find("not divisible"), std::string::npos);
}

TEST(EngineConfigValidation, NamesTheKey) {
  EngineConfig c;
  c.bucket_elements = 0;
  EXPECT_THROW(validate(c), ConfigError);
  c = EngineConfig{};
  c.stage = -1;
  EXPECT_THROW(validate(c), ConfigError);
  EXPECT_THROW(make_partition({{"x", {{"x", 3}}}}, 2, 0), ConfigError);
}
