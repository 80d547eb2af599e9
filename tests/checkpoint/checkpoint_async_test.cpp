// Async save: the shard snapshot is taken at save(), training goes on while a background thread writes,
// finish_pending() publishes at a step boundary once every rank's write is done; what is loaded is
// exactly the state at save() time. A failed background write is a SaveError at the publish point.
#include "tests/checkpoint/ckpt_harness.h"

using namespace zero;
using namespace zero::testing;
namespace fs = std::filesystem;

TEST(CheckpointAsync, PublishesSnapshotTakenAtSave) {
  const std::string root = shared_temp_dir("async");
  checkpoint::FullState at_save, uninterrupted;
  {
    MlpRun run(MPI_COMM_WORLD, 3);
    run.train(0, 3);
    checkpoint::Checkpointer ck(*run.engine, ckpt_opts(root, true, 2));
    ck.save(run.state(3));
    EXPECT_TRUE(ck.pending());
    at_save = checkpoint::gather_full_state(*run.engine);
    bool published = false;
    for (int s = 3; s < kTotalSteps; ++s) {  // training goes on; publish happens at a step boundary
      run.train(s, s + 1);
      published = published || ck.finish_pending();
    }
    ck.wait();
    EXPECT_FALSE(ck.pending());
    EXPECT_EQ(ck.last_published_step(), 3);
    uninterrupted = checkpoint::gather_full_state(*run.engine);
    // A second async save completes on wait(); retention keeps the newest two.
    ck.save(run.state(kTotalSteps));
    ck.wait();
    EXPECT_EQ(*checkpoint::find_latest(root), ck.paths().step_dir(kTotalSteps));
  }
  MlpRun run(MPI_COMM_WORLD, 3);
  checkpoint::Checkpointer ck(*run.engine, ckpt_opts(root));
  ck.load(ck.paths().step_dir(3));
  EXPECT_TRUE(checkpoint::gather_full_state(*run.engine) == at_save);
  run.train(3, kTotalSteps);
  EXPECT_TRUE(checkpoint::gather_full_state(*run.engine) == uninterrupted);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(root);
}

TEST(CheckpointAsync, BackgroundEnospcIsReportedAtPublish) {
  const std::string root = shared_temp_dir("async_enospc");
  MlpRun run(MPI_COMM_WORLD, 2);
  run.train(0, 2);
  {
    checkpoint::Checkpointer ok(*run.engine, ckpt_opts(root));
    ok.save(run.state(2));
  }
  setenv("ZERO_FAULT", "ckpt_enospc_after_bytes=512@step4", 1);
  checkpoint::Checkpointer ck(*run.engine, ckpt_opts(root, true, 3));
  unsetenv("ZERO_FAULT");
  run.train(2, 4);
  ck.save(run.state(4));
  run.train(4, 5);
  expect_error<checkpoint::SaveError>([&] { ck.wait(); }, {"saving checkpoint step_4", "No space left on device"});
  EXPECT_FALSE(ck.pending());
  EXPECT_EQ(*checkpoint::find_latest(root), ck.paths().step_dir(2));
  EXPECT_FALSE(fs::exists(ck.paths().tmp_dir(4)));
  ck.save(run.state(5));  // the fault was for step 4 only
  ck.wait();
  EXPECT_EQ(*checkpoint::find_latest(root), ck.paths().step_dir(5));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(root);
}
