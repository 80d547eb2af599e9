// A damaged or unfitting checkpoint is a clear InputError naming the file, thrown on every rank (the
// ranks agree before any further collective, so none hangs): truncated shard, flipped byte (xxhash64),
// missing shard, missing manifest, newer format version, another model shape. A save that fails with
// ENOSPC is a SaveError on every rank; the previous checkpoint and `latest` survive.
#include <cstdlib>
#include <fstream>

#include "tests/checkpoint/ckpt_harness.h"

using namespace zero;
using namespace zero::testing;
namespace fs = std::filesystem;

namespace {
// A fresh copy of `src` at `dst` with `damage` applied by rank 0; every rank waits for it.
void damaged_copy(const std::string& src, const std::string& dst, const std::function<void()>& damage) {
  if (world_rank() == 0) {
    fs::remove_all(dst);
    fs::copy(src, dst);
    damage();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

void edit_manifest(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = dir + "/manifest.json";
  nlohmann::json j = nlohmann::json::parse(checkpoint::read_small_file(path));
  edit(j);
  std::ofstream(path) << j.dump(2);
}

class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    root = shared_temp_dir("errors");
    MlpRun run(MPI_COMM_WORLD, 1);
    run.train(0, 2);
    checkpoint::Checkpointer ck(*run.engine, ckpt_opts(root + "/run"));
    ck.save(run.state(2));
    good = ck.paths().step_dir(2);
    last = fmt::format("rank_{}.bin", world_size() - 1);
  }
  void TearDown() override {
    ck4.reset();  // save_step_4's, before its run and before the files go
    run4.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) fs::remove_all(root);
  }
  // Loads `dir` into a fresh engine at `stage` (0 reads every file, 1 only its own).
  void load(const std::string& dir, int stage = 1, example::MlpSpec spec = {}) {
    MlpRun run(MPI_COMM_WORLD, stage, spec);
    checkpoint::load_checkpoint(*run.engine, dir);
  }
  // Trains on to step 4 and saves a sound step_4 beside step_2 (resume 'auto' takes it), with a copy of it at
  // keep4() to restore from. The Checkpointer (and the run it saves) live as long as the test.
  checkpoint::Checkpointer& save_step_4() {
    run4 = std::make_unique<MlpRun>(MPI_COMM_WORLD, 1);
    run4->train(0, 4);
    ck4 = std::make_unique<checkpoint::Checkpointer>(*run4->engine, ckpt_opts(root + "/run"));
    ck4->save(run4->state(4));
    EXPECT_EQ(*ck4->resume_path("auto"), ck4->paths().step_dir(4));
    damaged_copy(ck4->paths().step_dir(4), keep4(), [] {});
    return *ck4;
  }
  std::string keep4() const { return root + "/keep4"; }
  std::string root, good, last;
  std::unique_ptr<MlpRun> run4;  // declared before ck4, which holds its engine: destroyed after it
  std::unique_ptr<checkpoint::Checkpointer> ck4;
};
}  // namespace

TEST_F(CheckpointErrors, GoodCheckpointLoads) {
  EXPECT_NO_THROW(load(good, 1));
  EXPECT_NO_THROW(load(good, 0));
}

TEST_F(CheckpointErrors, TruncatedShard) {
  const std::string bad = root + "/truncated";
  damaged_copy(good, bad, [&] { fs::resize_file(bad + "/" + last, fs::file_size(bad + "/" + last) - 8); });
  for (int stage : {1, 0})  // only the last rank reads it / every rank reads it
    expect_error<InputError>([&] { load(bad, stage); }, {"checkpoint file " + bad + "/" + last + " is truncated"});
}

// The first and the last rank's file: each is hashed by another rank of the load (file q by rank q mod W), and
// a flipped byte in either is found.
TEST_F(CheckpointErrors, CorruptedByte) {
  const std::string bad = root + "/corrupt";
  for (const std::string& file : {std::string("rank_0.bin"), last}) {
    damaged_copy(good, bad, [&] {
      std::fstream f(bad + "/" + file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(100);
      char c = 0;
      f.read(&c, 1);
      c ^= 0x10;
      f.seekp(100);
      f.write(&c, 1);
    });
    for (int stage : {1, 0})
      expect_error<InputError>([&] { load(bad, stage); },
                               {"checkpoint file " + bad + "/" + file + " is corrupted: xxhash64", "the manifest says"});
  }
}

TEST_F(CheckpointErrors, MissingShardAndManifest) {
  const std::string bad = root + "/missing";
  damaged_copy(good, bad, [&] { fs::remove(bad + "/" + last); });
  expect_error<InputError>([&] { load(bad); }, {"checkpoint file " + bad + "/" + last + " is missing"});
  damaged_copy(good, bad, [&] { fs::remove(bad + "/manifest.json"); });
  expect_error<InputError>([&] { load(bad); }, {"checkpoint file " + bad + "/manifest.json is missing"});
  expect_error<InputError>([&] { load(root + "/nowhere"); }, {"checkpoint directory " + root + "/nowhere does not exist"});
}

TEST_F(CheckpointErrors, NewerFormatVersion) {
  const std::string bad = root + "/newer";
  damaged_copy(good, bad, [&] { edit_manifest(bad, [](nlohmann::json& j) { j["format_version"] = 7; }); });
  expect_error<InputError>([&] { load(bad); },
                           {bad + "/manifest.json: checkpoint format version 7 is newer than this build supports (version 1)"});
}

TEST_F(CheckpointErrors, OtherModelShape) {
  expect_error<InputError>([&] { load(good, 1, example::MlpSpec{{12, 24, 19, 5}, 1234}); },
                           {"checkpoint " + good + " does not fit the model",
                            "tensor 'layer1.weight' (group 'layer1') has shape [432] in the checkpoint but [456] in the model"});
}

TEST_F(CheckpointErrors, EnospcKeepsPreviousCheckpoint) {
  MlpRun run(MPI_COMM_WORLD, 2);
  run.train(0, 3);
  const std::string fault = fmt::format("ckpt_enospc_after_bytes=1000@rank{}", world_size() - 1);
  setenv("ZERO_FAULT", fault.c_str(), 1);
  checkpoint::Checkpointer ck(*run.engine, ckpt_opts(root + "/run"));
  unsetenv("ZERO_FAULT");
  expect_error<checkpoint::SaveError>([&] { ck.save(run.state(3)); },
                                      {"saving checkpoint step_3", fmt::format("rank {}: ", world_size() - 1),
                                       last + " failed after 1000 bytes: No space left on device", "ENOSPC",
                                       "previous checkpoint and `latest` are unchanged"});
  EXPECT_EQ(*checkpoint::find_latest(root + "/run"), good);
  EXPECT_FALSE(fs::exists(ck.paths().tmp_dir(3)));
  EXPECT_FALSE(fs::exists(ck.paths().step_dir(3)));
  EXPECT_NO_THROW(load(good));
  // The run can go on and save later (the fault was parsed by that Checkpointer only).
  checkpoint::Checkpointer ok(*run.engine, ckpt_opts(root + "/run"));
  ok.save(run.state(3));
  EXPECT_EQ(*checkpoint::find_latest(root + "/run"), ok.paths().step_dir(3));
}

TEST_F(CheckpointErrors, ResumeAutoTakesTheNewestSoundCheckpointAndNothingNewerThanLatest) {
  // step_2 (the fixture's) and step_4; step_4's rank 0 file then gets a flipped byte, then is truncated.
  checkpoint::Checkpointer& ck = save_step_4();
  const std::string newest = ck.paths().step_dir(4);
  if (world_rank() == 0) {
    std::fstream f(newest + "/rank_0.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put(char(0x5a));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(*ck.resume_path("auto"), good) << "a corrupted newest checkpoint must be skipped";
  if (world_rank() == 0) fs::resize_file(newest + "/rank_0.bin", 8);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(*ck.resume_path("auto"), good) << "a truncated newest checkpoint must be skipped";
  // A run started over in this directory: `latest` back at step 2 while a sound step_4 is still on disk.
  if (world_rank() == 0) {
    fs::remove_all(newest);
    fs::copy(keep4(), newest);
    std::ofstream(ck.paths().latest_file()) << "step_2\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(*ck.resume_path("auto"), good) << "resume auto went past `latest`";
}

// Bytes this process has read through read(2)/pread(2) so far (/proc/self/io rchar: counted by the kernel, at
// the syscall boundary, page-cache hits included).
uint64_t bytes_read_by_process() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  ADD_FAILURE() << "no rchar in /proc/self/io";
  return 0;
}

// resume auto hashes each file of the checkpoint it takes once, every rank its share (file q by rank q mod W),
// not all of them on rank 0 while the others wait: each rank reads its share's bytes and no more than a
// manifest's worth beyond (counted by the kernel). A corrupted file that is not rank 0's is found by its rank,
// and the checkpoint skipped all the same.
TEST_F(CheckpointErrors, ResumeAutoHashesEachFileOnceSpreadOverTheRanks) {
  // A wider MLP than the fixture's (about 70k parameters: rank files of 200-400 KiB, far above a manifest's few
  // KiB), saved at steps 1 and 2.
  example::MlpSpec spec;
  spec.dims = {12, 256, 256, 5};
  MlpRun run(MPI_COMM_WORLD, 1, spec);
  checkpoint::Checkpointer ck(*run.engine, ckpt_opts(root + "/wide"));
  run.train(0, 1);
  ck.save(run.state(1));
  run.train(1, 2);
  ck.save(run.state(2));
  const std::string older = ck.paths().step_dir(1), newest = ck.paths().step_dir(2);
  const checkpoint::Manifest m = checkpoint::Manifest::read(newest);
  uint64_t share = 0;
  for (size_t q = 0; q < m.files.size(); ++q)
    if (int(q) % world_size() == world_rank()) share += m.files[q].bytes;
  ASSERT_GT(m.files.back().bytes, 128u * 1024) << "rank files too small to tell a share from the whole";
  MPI_Barrier(MPI_COMM_WORLD);
  const uint64_t before = bytes_read_by_process();
  EXPECT_EQ(*ck.resume_path("auto"), newest);
  const uint64_t read = bytes_read_by_process() - before;
  EXPECT_GE(read, share) << "rank " << world_rank() << " did not hash its files";
  EXPECT_LE(read, share + 64 * 1024) << "rank " << world_rank() << " read " << read << " bytes for a share of " << share;
  // The load that follows does not hash them again: nothing beyond the rank's own file at the same world.
  MPI_Barrier(MPI_COMM_WORLD);
  const uint64_t before_load = bytes_read_by_process();
  ck.load(newest);
  EXPECT_LE(bytes_read_by_process() - before_load, m.files[size_t(world_rank())].bytes + 64 * 1024);

  // The last rank's file corrupted: found by that rank, and step_2 skipped for step_1.
  if (world_rank() == 0) {
    std::fstream f(newest + "/" + last, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4000);
    f.put(char(0x5a));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(*ck.resume_path("auto"), older) << "a newest checkpoint with a corrupted " << last << " must be skipped";
}

TEST_F(CheckpointErrors, ResumeAutoSkipsANewestCheckpointWithAnUnsoundManifest) {
  // step_2 (the fixture's) and a sound step_4; then step_4's manifest gets one unsound field at a time.
  checkpoint::Checkpointer& ck = save_step_4();
  const std::string newest = ck.paths().step_dir(4);
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> edits = {
      {[](nlohmann::json& j) { j["trainer"]["step"] = -5; }, "trainer.step is -5; it must be >= 0"},
      {[](nlohmann::json& j) { j["trainer"]["step"] = 3; }, "trainer.step 3 but the directory is step_4"},
      {[](nlohmann::json& j) { j["stage"] = 9; }, "stage 9 is not 0-3"},
      {[](nlohmann::json& j) { j["dtype"] = "bf16"; }, "dtype is \"bf16\""},
      {[](nlohmann::json& j) { j["trainer"]["rng"] = 5; }, "trainer.rng is 5"},
      {[](nlohmann::json& j) { j["trainer"]["optimizer_step"] = -1; }, "trainer.optimizer_step is -1"},
      {[](nlohmann::json& j) { j["groups"] = nlohmann::json::array(); }, "groups is empty"},
  };
  for (const auto& [edit, error] : edits) {
    if (world_rank() == 0) {
      fs::remove_all(newest);
      fs::copy(keep4(), newest);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(*ck.resume_path("auto"), newest) << "the restored step_4 is sound";
    if (world_rank() == 0) edit_manifest(newest, edit);
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(*ck.resume_path("auto"), good) << "resume auto took step_4 with an unsound manifest: " << error;
    // Loading it by name is the same InputError, prefixed once with the failing rank at world > 1.
    const std::string prefix = world_size() > 1 ? "rank 0: " : "";
    try {
      load(newest);
      ADD_FAILURE() << "no error: " << error;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(prefix + newest + "/manifest.json: " + error, 0), 0u) << e.what();
    }
  }
}
