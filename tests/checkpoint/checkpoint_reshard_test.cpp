// Resume at the same and at other world sizes and stages, in one process: a sub-communicator of the
// first n ranks plays each world size. Saved and loaded master, m and v agree bit for bit per global
// element (gathered on both sides), and training then continues like the uninterrupted run (bitwise at
// the same world size and stage; within fp32 round-off otherwise, as the reduction order differs).
#include <cstring>

#include "checkpoint/shard_layout.h"
#include "comm/hybrid_groups.h"
#include "tests/checkpoint/ckpt_harness.h"

using namespace zero;
using namespace zero::testing;

namespace {
struct Case {
  int w1, s1, w2, s2;
  size_t chunk_bytes = checkpoint::kRankFileChunkBytes;  // the host buffer a save and a load stream through
};

void run_case(const Case& c, const std::string& run_dir) {
  SCOPED_TRACE(fmt::format("world {} stage {} -> world {} stage {}", c.w1, c.s1, c.w2, c.s2));
  checkpoint::FullState saved, uninterrupted;
  {
    SubWorld a(c.w1);
    if (a.member()) {
      MlpRun run(a.comm(), c.s1);
      run.train(0, 4);
      checkpoint::CheckpointOptions o = ckpt_opts(run_dir);
      o.chunk_bytes = c.chunk_bytes;
      checkpoint::Checkpointer ck(*run.engine, o);
      ck.save(run.state(4));
      saved = checkpoint::gather_full_state(*run.engine);
      run.train(4, kTotalSteps);
      uninterrupted = checkpoint::gather_full_state(*run.engine);
    }
  }
  SubWorld b(c.w2);
  if (!b.member()) return;
  MlpRun run(b.comm(), c.s2);
  checkpoint::CheckpointOptions o = ckpt_opts(run_dir);
  o.chunk_bytes = c.chunk_bytes;
  checkpoint::Checkpointer ck(*run.engine, o);
  const auto path = ck.resume_path("auto");
  ASSERT_TRUE(path.has_value());
  const checkpoint::LoadResult res = ck.load(*path);
  EXPECT_EQ(res.state.step, 4);
  EXPECT_EQ(res.state.data_cursor["step"], 4);
  EXPECT_EQ(res.saved_world, c.w1);
  EXPECT_EQ(res.saved_stage, c.s1);
  EXPECT_EQ(res.resharded, !(c.w1 == c.w2 && c.s2 != 0));
  const checkpoint::FullState loaded = checkpoint::gather_full_state(*run.engine);
  run.train(4, kTotalSteps);
  const checkpoint::FullState resumed = checkpoint::gather_full_state(*run.engine);
  if (world_rank() >= c.w1) return;  // only ranks of both worlds hold both sides
  EXPECT_TRUE(loaded == saved) << "master/m/v after load differ from what was saved";
  EXPECT_EQ(loaded.optimizer_step, 4);
  if (c.w1 == c.w2 && c.s1 == c.s2) {
    EXPECT_TRUE(resumed == uninterrupted) << "same world size and stage: resumed training must be bit-exact";
  } else {
    EXPECT_LT(rel_diff(resumed.master, uninterrupted.master), 1e-5);
    EXPECT_LT(rel_diff(resumed.m, uninterrupted.m), 1e-4);
    EXPECT_LT(rel_diff(resumed.v, uninterrupted.v), 1e-4);
  }
}
}  // namespace

TEST(CheckpointReshard, SameWorldEveryStageBitExact) {
  const int w = std::min(world_size(), 2);
  for (int stage = 0; stage <= 3; ++stage) {
    const std::string dir = shared_temp_dir(fmt::format("same_s{}", stage));
    run_case({w, stage, w, stage}, dir);
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove_all(dir);
  }
}

TEST(CheckpointReshard, OtherWorldSizesAndStages) {
  const std::vector<Case> cases = {
      {4, 3, 2, 1},  // 4 -> 2, stage 3 -> 1
      {2, 0, 3, 2},  // 2 -> 3, stage 0 -> 2
      {3, 2, 4, 3},  // 3 -> 4
      {2, 3, 2, 1},  // stage 3 -> 1 at one world size
      {2, 0, 2, 2},  // stage 0 -> 2 at one world size
      {4, 1, 1, 0},  // 4 ranks -> 1 process, full state
      {1, 0, 4, 3},  // 1 -> 4, shards smaller than some groups' padding
      {2, 2, 2, 0},  // sharded -> stage 0 (every rank reads every file)
  };
  int ran = 0;
  for (const Case& c : cases) {
    if (std::max(c.w1, c.w2) > world_size()) continue;
    const std::string dir = shared_temp_dir(fmt::format("reshard_{}{}{}{}", c.w1, c.s1, c.w2, c.s2));
    run_case(c, dir);
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove_all(dir);
    ++ran;
  }
  EXPECT_GE(ran, 2);
}

// Streamed through a host buffer of 9 floats (pieces cross every array and group boundary): the same file
// and the same resumed training, at the same layout and resharded (padding zeroed). On the scrambled backend
// the save streams too; on the CPU backend it writes the engine's arrays in place and only the load streams.
TEST(CheckpointReshard, SmallStreamingChunks) {
  const size_t chunk = 9 * sizeof(float);
  for (const Case& c : {Case{2, 3, 2, 3, chunk}, Case{2, 1, 1, 3, chunk}, Case{1, 2, 2, 0, chunk}}) {
    const std::string dir = shared_temp_dir(fmt::format("chunks_{}{}{}{}", c.w1, c.s1, c.w2, c.s2));
    run_case(c, dir);
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove_all(dir);
  }
}

// stream_rank_file hands over pieces no larger than its buffer that join to read_rank_file's bytes, and
// load_rank_file puts those bytes back into another engine.
TEST(CheckpointStream, PiecesAreBoundedAndJoinToTheRankFile) {
  MlpRun run(MPI_COMM_WORLD, 2);
  run.train(0, 2);
  const HostVector<char> whole = checkpoint::read_rank_file(*run.engine);
  ASSERT_EQ(whole.size(), checkpoint::rank_file_bytes(*run.engine));
  for (size_t chunk : {size_t(44), size_t(7), size_t(1) << 20}) {
    HostVector<char> joined;
    size_t pieces = 0;
    checkpoint::stream_rank_file(
        *run.engine,
        [&](const void* p, size_t n) {
          EXPECT_LE(n, std::max<size_t>(chunk, sizeof(float)));
          EXPECT_GT(n, 0u);
          joined.insert(joined.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
          ++pieces;
        },
        chunk);
    EXPECT_TRUE(joined == whole) << "chunk " << chunk;
    EXPECT_GE(pieces, std::min<size_t>(whole.size() / std::max<size_t>(chunk, 4), 3 * run.engine->partition().groups.size()));
    MlpRun fresh(MPI_COMM_WORLD, 2);
    size_t at = 0;
    checkpoint::load_rank_file(
        *fresh.engine,
        [&](void* dst, size_t n) {
          ASSERT_LE(at + n, whole.size());
          std::memcpy(dst, whole.data() + at, n);
          at += n;
        },
        chunk);
    EXPECT_EQ(at, whole.size());
    EXPECT_TRUE(checkpoint::read_rank_file(*fresh.engine) == whole) << "chunk " << chunk;
  }
}

// Hybrid sharding (shard groups of W/2 ranks, replicated across the two groups): the first group writes the
// files, one per rank of a group (the manifest's world is the group's), while every rank agrees over the whole
// world. The checkpoint loads into the same groups, training then going on bit for bit as without the stop,
// and into a plain engine over every rank (resharded: the same master, m and v). Sync and async saves.
TEST(CheckpointHybrid, TheFirstGroupWritesAndAnyLayoutLoads) {
  const int W = world_size(), S = W / 2;
  if (W < 2) GTEST_SKIP() << "hybrid sharding needs 2 ranks";
  auto world = make_test_comm(MPI_COMM_WORLD);
  const HybridComms h = split_hybrid(MPI_COMM_WORLD, S);
  for (bool async : {false, true})
    for (int stage : {1, 3}) {
      SCOPED_TRACE(fmt::format("groups of {}, stage {}, {}", S, stage, async ? "async" : "sync"));
      const std::string dir = shared_temp_dir(fmt::format("hybrid_{}{}", stage, int(async)));
      checkpoint::CheckpointOptions o = ckpt_opts(dir, async);
      o.world = world.get();
      checkpoint::FullState saved, uninterrupted;
      {
        MlpRun run(h.shard, h.replicas, stage);
        run.train(0, 4);
        checkpoint::Checkpointer ck(*run.engine, o);
        ck.save(run.state(4));
        ck.wait();
        EXPECT_EQ(ck.last_published_step(), 4);
        saved = checkpoint::gather_full_state(*run.engine);
        run.train(4, kTotalSteps);
        uninterrupted = checkpoint::gather_full_state(*run.engine);
      }
      const std::string step_dir = checkpoint::RunPaths(dir).step_dir(4);
      if (world_rank() == 0) {
        int files = 0;
        for (const auto& f : std::filesystem::directory_iterator(step_dir))
          files += f.path().extension() == ".bin";
        EXPECT_EQ(files, S);
        const checkpoint::Manifest m = checkpoint::Manifest::read(step_dir);
        EXPECT_EQ(m.world, S);
        EXPECT_EQ(m.shard_groups, 2);
      }
      {
        MlpRun run(h.shard, h.replicas, stage);
        checkpoint::Checkpointer ck(*run.engine, o);
        const checkpoint::LoadResult res = ck.load(*ck.resume_path("auto"));
        EXPECT_FALSE(res.resharded);
        EXPECT_TRUE(checkpoint::gather_full_state(*run.engine) == saved);
        run.train(4, kTotalSteps);
        EXPECT_TRUE(checkpoint::gather_full_state(*run.engine) == uninterrupted) << "resumed in the same groups";
      }
      {
        MlpRun run(MPI_COMM_WORLD, 2);
        checkpoint::Checkpointer ck(*run.engine, ckpt_opts(dir));
        const checkpoint::LoadResult res = ck.load(step_dir);
        EXPECT_EQ(res.saved_world, S);
        EXPECT_EQ(res.saved_shard_groups, 2);
        EXPECT_TRUE(res.resharded);
        EXPECT_TRUE(checkpoint::gather_full_state(*run.engine) == saved);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (world_rank() == 0) std::filesystem::remove_all(dir);
    }
  {
    MlpRun run(h.shard, h.replicas, 2);
    const std::string dir = shared_temp_dir("hybrid_no_world");
    expect_error<ConfigError>([&] { checkpoint::Checkpointer ck(*run.engine, ckpt_opts(dir)); },
                              {"groups of", "CheckpointOptions::world"});
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove_all(dir);
  }
  MPI_Comm shard = h.shard, replicas = h.replicas;
  MPI_Comm_free(&shard);
  MPI_Comm_free(&replicas);
}
