// Single-process pieces of the sharded checkpoint: fault-spec parsing, the resharding plan (every real
// element read exactly once, from the right file), the manifest's JSON round trip and version check,
// durable writes with an injected ENOSPC, atomic publish / `latest` / retention.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "checkpoint/fault.h"
#include "checkpoint/full_tensors.h"
#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "checkpoint/publish.h"
#include "checkpoint/reshard_plan.h"
#include "checkpoint/verify.h"

using namespace zero;
using namespace zero::checkpoint;
namespace fs = std::filesystem;

namespace {
std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / fmt::format("zero_ckpt_unit_{}_{}", name, ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::vector<GroupEntry> groups_at(const std::vector<size_t>& numels, int world) {
  std::vector<GroupEntry> out;
  for (size_t i = 0; i < numels.size(); ++i) {
    const size_t shard = (numels[i] + world - 1) / world;
    out.push_back({fmt::format("g{}", i), numels[i], shard, shard * world, {{fmt::format("g{}.w", i), numels[i], 0}}});
  }
  return out;
}
}  // namespace

TEST(CheckpointFault, ParsesEntriesAndQualifiers) {
  const FaultPlan p = FaultPlan::parse("other_fault=1,ckpt_kill_after_bytes=4096@rank1,ckpt_enospc_after_bytes=0@step8@rank0");
  ASSERT_EQ(p.faults.size(), 2u);
  EXPECT_EQ(p.faults[0].kind, FaultKind::KillAfterBytes);
  EXPECT_EQ(p.faults[0].after_bytes, 4096u);
  EXPECT_EQ(p.faults[0].rank, 1);
  EXPECT_EQ(p.faults[0].step, -1);
  EXPECT_EQ(p.faults[1].kind, FaultKind::EnospcAfterBytes);
  EXPECT_EQ(p.faults[1].step, 8);
  EXPECT_EQ(p.faults[1].rank, 0);
  EXPECT_EQ(p.for_write(1, 8).size(), 1u);
  EXPECT_EQ(p.for_write(0, 8).size(), 1u);
  EXPECT_EQ(p.for_write(0, 4).size(), 0u);
  EXPECT_THROW(FaultPlan::parse("ckpt_explode=1"), ConfigError);
  EXPECT_THROW(FaultPlan::parse("ckpt_kill_after_bytes=x"), ConfigError);
  EXPECT_THROW(FaultPlan::parse("ckpt_kill_after_bytes=1@node3"), ConfigError);
  EXPECT_TRUE(FaultPlan::parse("").faults.empty());
}

TEST(CheckpointFault, ParsesPublishPoints) {
  const FaultPlan p = FaultPlan::parse("ckpt_kill_at=renamed@step6,ckpt_enospc_at=latest@rank0,ckpt_kill_at=manifest@step8");
  ASSERT_EQ(p.faults.size(), 3u);
  EXPECT_EQ(p.faults[0].point, FaultPoint::Renamed);
  EXPECT_EQ(p.faults[1].point, FaultPoint::Latest);
  EXPECT_EQ(p.faults[1].kind, FaultKind::EnospcAfterBytes);
  EXPECT_EQ(p.faults[2].point, FaultPoint::Manifest);
  EXPECT_TRUE(p.for_write(0, 6).empty());  // publish faults never touch the shard write
  EXPECT_TRUE(p.for_publish(0, 6).kill_after_rename);
  EXPECT_EQ(p.for_publish(0, 6).latest.size(), 1u);
  EXPECT_TRUE(p.for_publish(1, 6).latest.empty());
  EXPECT_EQ(p.for_publish(0, 8).manifest.size(), 1u);
  EXPECT_FALSE(p.for_publish(0, 8).kill_after_rename);
  EXPECT_EQ(midway(p.for_publish(0, 8).manifest, 1001)[0].after_bytes, 500u);
  EXPECT_THROW(FaultPlan::parse("ckpt_enospc_at=renamed"), ConfigError);  // no write there
  EXPECT_THROW(FaultPlan::parse("ckpt_kill_at=shard"), ConfigError);
}

TEST(CheckpointFault, EnospcCounterAllowsBytesUpToThreshold) {
  FaultCounter c({Fault{FaultKind::EnospcAfterBytes, 100, -1, -1}});
  EXPECT_EQ(c.before_write(60), 60u);
  c.after_write(60);
  EXPECT_EQ(c.before_write(60), 40u);
  c.after_write(40);
  EXPECT_EQ(c.before_write(20), 0u);
}

TEST(CheckpointFile, InjectedEnospcFailsTheWriteNamingTheFile) {
  const std::string dir = temp_dir("enospc");
  std::vector<char> data(10000, 'x');
  FaultCounter c({Fault{FaultKind::EnospcAfterBytes, 4096, -1, -1}});
  try {
    write_file(dir + "/rank_0.bin", {Segment{data.data(), data.size()}}, &c);
    FAIL() << "no error";
  } catch (const SaveError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(dir + "/rank_0.bin"), std::string::npos) << msg;
    EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ENOSPC"), std::string::npos) << msg;
    EXPECT_NE(msg.find("after 4096 bytes"), std::string::npos) << msg;
  }
  const WrittenFile w = write_file(dir + "/ok.bin", {Segment{data.data(), 10}, Segment{data.data(), 5}});
  EXPECT_EQ(w.bytes, 15u);
  ReadFile f(dir + "/ok.bin");
  EXPECT_EQ(hash_file(f), w.xxh64);
  char buf[20];
  EXPECT_THROW(f.read_at(10, buf, 10), InputError);  // past the end: "truncated"
  EXPECT_THROW(ReadFile(dir + "/missing.bin"), InputError);
  fs::remove_all(dir);
}

// Every real element of every group is read exactly once, from the file whose slice holds it, for all
// pairs of world sizes 1..5 and both sharded and full (stage 0) destinations.
TEST(CheckpointPlan, CoversEveryRealElementOnce) {
  const std::vector<size_t> numels = {1, 5, 7, 12, 13, 100};
  for (int old_w = 1; old_w <= 5; ++old_w) {
    const auto saved = groups_at(numels, old_w);
    for (int new_w = 1; new_w <= 5; ++new_w) {
      for (bool full : {false, true}) {
        for (int r = 0; r < new_w; ++r) {
          std::vector<DestRange> dest;
          for (size_t n : numels) {
            const size_t shard = (n + new_w - 1) / new_w;
            dest.push_back(full ? DestRange{0, shard * new_w} : DestRange{size_t(r) * shard, shard});
          }
          std::vector<std::vector<int>> hits(numels.size());
          for (size_t g = 0; g < numels.size(); ++g) hits[g].assign(dest[g].count, 0);
          const std::vector<ReadSpan> spans = plan_reads(saved, old_w, dest);
          for (const ReadSpan& s : spans) {
            const GroupEntry& G = saved[s.group];
            ASSERT_LE(s.src_elem + s.count, G.shard);
            for (size_t i = 0; i < s.count; ++i) {
              const size_t global = size_t(s.file) * G.shard + s.src_elem + i;
              ASSERT_EQ(global, dest[s.group].begin + s.dst_elem + i);
              ASSERT_LT(global, G.numel);
              ++hits[s.group][s.dst_elem + i];
            }
          }
          for (size_t g = 0; g < numels.size(); ++g)
            for (size_t i = 0; i < dest[g].count; ++i)
              EXPECT_EQ(hits[g][i], dest[g].begin + i < numels[g] ? 1 : 0)
                  << "old " << old_w << " new " << new_w << " rank " << r << " group " << g << " elem " << i;
          // What the load zeroes instead: exactly the elements no span reads.
          for (size_t g = 0; g < numels.size(); ++g) {
            std::vector<int> gap(dest[g].count, 0);
            for (const DestRange& u : uncovered(spans, int(g), dest[g].count))
              for (size_t i = u.begin; i < u.begin + u.count; ++i) ++gap[i];
            for (size_t i = 0; i < dest[g].count; ++i) EXPECT_EQ(gap[i], hits[g][i] ? 0 : 1) << "group " << g << " elem " << i;
          }
        }
      }
    }
  }
}

TEST(CheckpointPlan, UncoveredRangesAreTheGapsBetweenSpans) {
  const std::vector<ReadSpan> spans = {{0, 0, 0, 5, 3}, {1, 0, 0, 0, 5}, {0, 1, 0, 2, 2}};
  auto ranges = [](const std::vector<DestRange>& v) {
    std::vector<std::pair<size_t, size_t>> out;
    for (const DestRange& d : v) out.emplace_back(d.begin, d.count);
    return out;
  };
  using R = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(ranges(uncovered(spans, 0, 10)), (R{{8, 2}}));  // spans out of order, then the padding
  EXPECT_EQ(ranges(uncovered(spans, 0, 8)), R{});
  EXPECT_EQ(ranges(uncovered(spans, 1, 6)), (R{{0, 2}, {4, 2}}));
  EXPECT_EQ(ranges(uncovered(spans, 2, 4)), (R{{0, 4}}));  // a group nothing is read for
}

TEST(CheckpointManifest, JsonRoundTripAndVersionCheck) {
  Manifest m;
  m.step = 12;
  m.world = 2;
  m.stage = 3;
  m.optimizer_step = 11;
  m.config = "a: 1\nb: [2, 3]\n";
  m.groups = groups_at({5, 9}, 2);
  m.files = {{"rank_0.bin", 0, 96, 0x0123456789abcdefULL}, {"rank_1.bin", 1, 96, 42}};  // 12 x (3 + 5)
  m.state.step = 12;
  m.state.data_cursor = {{"epoch", 1}, {"position", 7}};
  m.state.rng = {{"seed", 3}};
  const Manifest back = Manifest::from_json(m.to_json(), "test");
  EXPECT_EQ(back.to_json(), m.to_json());
  EXPECT_EQ(back.files[0].xxh64, 0x0123456789abcdefULL);
  EXPECT_EQ(back.state.data_cursor["position"], 7);

  auto j = m.to_json();
  j["format_version"] = kFormatVersion + 1;
  try {
    Manifest::from_json(j, "dir/manifest.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dir/manifest.json: checkpoint format version 2 is newer than this build "
                                         "supports (version 1)"), std::string::npos) << e.what();
  }
  j = m.to_json();
  j["groups"][1]["shard"] = 4;  // inconsistent with world 2
  EXPECT_THROW(Manifest::from_json(j, "x"), InputError);
  j = m.to_json();
  j.erase("trainer");
  EXPECT_THROW(Manifest::from_json(j, "x"), InputError);
}

TEST(CheckpointManifest, ModelMismatchNamesTensorAndShapes) {
  Manifest m;
  m.groups = groups_at({5, 9}, 1);
  std::vector<GroupInfo> model = {{"g0", {{"g0.w", 5, true}}}, {"g1", {{"g1.w", 10, true}}}};
  try {
    check_model_matches(m, model, "ck/step_4");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'g1.w' (group 'g1') has shape [9] in the checkpoint but [10] in the model"),
              std::string::npos) << e.what();
  }
  model[1] = {"g1", {{"g1.other", 9, true}}};
  EXPECT_THROW(check_model_matches(m, model, "x"), InputError);
  model.pop_back();
  EXPECT_THROW(check_model_matches(m, model, "x"), InputError);
}

namespace {
// A sound manifest of step `step` at world 2: groups of 5 and 9 elements in 64-element shards (as saved
// now) and rank files of the size the groups need.
Manifest sound_manifest(int64_t step) {
  Manifest m;
  m.step = step;
  m.world = 2;
  m.stage = 2;
  m.optimizer_step = step;
  m.config = "a: 1\n";
  m.groups = {{"g0", 5, 64, 128, {{"g0.w", 3, 0}, {"g0.b", 2, 3}}}, {"g1", 9, 64, 128, {{"g1.w", 9, 0}}}};
  m.files = {{"rank_0.bin", 0, 12 * 128, 1}, {"rank_1.bin", 1, 12 * 128, 2}};
  m.state.step = step;
  m.state.rng = {{"seed", 3}};
  return m;
}

// from_json's InputError text for `j` ("" when it parses).
std::string manifest_error(const nlohmann::json& j, const std::string& where = "step_4/manifest.json") {
  try {
    Manifest::from_json(j, where);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Writes `m` as <root>/checkpoints/step_<dir_step>/manifest.json with rank files of the listed sizes.
std::string write_checkpoint(const std::string& run, int64_t dir_step, const nlohmann::json& m) {
  const RunPaths p(run);
  const std::string dir = p.step_dir(dir_step);
  fs::create_directories(dir);
  std::ofstream(dir + "/" + kManifestName) << m.dump(2);
  for (const auto& f : m.at("files")) {
    std::ofstream(dir + "/" + f.at("name").get<std::string>());
    fs::resize_file(dir + "/" + f.at("name").get<std::string>(), f.at("bytes").get<uint64_t>());
  }
  return dir;
}
}  // namespace

TEST(CheckpointManifest, EachUnsoundFieldIsAnInputErrorNamingTheField) {
  const nlohmann::json good = sound_manifest(4).to_json();
  ASSERT_EQ(manifest_error(good), "");
  // The older, unaligned shards (ceil(numel / world)) are sound too.
  {
    nlohmann::json j = good;
    j["groups"][0]["shard"] = 3, j["groups"][0]["padded"] = 6, j["groups"][1]["shard"] = 5, j["groups"][1]["padded"] = 10;
    for (auto& f : j["files"]) f["bytes"] = 12 * (3 + 5);
    EXPECT_EQ(manifest_error(j), "");
    j["trainer"]["rng"] = nullptr;  // the default TrainState
    EXPECT_EQ(manifest_error(j), "");
    j["trainer"]["rng"] = nlohmann::json::array({1, 2});
    EXPECT_EQ(manifest_error(j), "");
  }
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"negative trainer.step", [](auto& j) { j["trainer"]["step"] = -5; }, "trainer.step is -5; it must be >= 0"},
      {"negative step", [](auto& j) { j["step"] = -1; }, "step is -1; it must be >= 0"},
      {"step vs trainer.step", [](auto& j) { j["trainer"]["step"] = 3; }, "step 4 but trainer.step 3"},
      {"negative optimizer_step", [](auto& j) { j["trainer"]["optimizer_step"] = -2; },
       "trainer.optimizer_step is -2; it must be >= 0"},
      {"stage 9", [](auto& j) { j["stage"] = 9; }, "stage 9 is not 0-3"},
      {"stage -1", [](auto& j) { j["stage"] = -1; }, "stage -1 is not 0-3"},
      {"world 0", [](auto& j) { j["world_size"] = 0; }, "world_size is 0; it must be >= 1"},
      {"world vs files", [](auto& j) { j["world_size"] = 3; }, "world_size 3 but 2 shard files listed"},
      {"dtype bf16", [](auto& j) { j["dtype"] = "bf16"; }, "dtype is \"bf16\"; this format stores only \"f32\""},
      {"dtype number", [](auto& j) { j["dtype"] = 4; }, "dtype is 4"},
      {"dtype missing", [](auto& j) { j.erase("dtype"); }, "malformed manifest: [json.exception.out_of_range.403] key 'dtype'"},
      {"rng a number", [](auto& j) { j["trainer"]["rng"] = 7; }, "trainer.rng is 7; it must be an object, an array or null"},
      {"rng a string", [](auto& j) { j["trainer"]["rng"] = "x"; }, "trainer.rng is \"x\""},
      {"no groups", [](auto& j) { j["groups"] = nlohmann::json::array(); }, "groups is empty"},
      {"shard too small", [](auto& j) { j["groups"][1]["shard"] = 4, j["groups"][1]["padded"] = 8; },
       "groups[1] 'g1': shard 4 does not fit numel 9 at world_size 2"},
      {"shard too large", [](auto& j) { j["groups"][1]["shard"] = 128, j["groups"][1]["padded"] = 256; },
       "groups[1] 'g1': shard 128 does not fit numel 9 at world_size 2"},
      {"padded", [](auto& j) { j["groups"][0]["padded"] = 127; },
       "groups[0] 'g0': padded 127 but it must be shard 64 x world_size 2"},
      {"empty group", [](auto& j) { j["groups"][0]["numel"] = 0, j["groups"][0]["tensors"] = nlohmann::json::array(); },
       "groups[0] 'g0': numel is 0"},
      {"tensor gap", [](auto& j) { j["groups"][0]["tensors"][1]["offset"] = 2; },
       "groups[0] 'g0': tensor 'g0.b' has offset 2, expected 3"},
      {"tensors short of numel", [](auto& j) { j["groups"][1]["tensors"][0]["numel"] = 8; },
       "groups[1] 'g1': numel is 9 but its tensors hold 8 elements"},
      {"tensor outside", [](auto& j) { j["groups"][1]["tensors"][0]["numel"] = 10; }, "tensor 'g1.w' (offset 0, numel 10) lies outside"},
      {"file bytes", [](auto& j) { j["files"][1]["bytes"] = 12 * 128 - 4; },
       "files[1] (rank_1.bin) bytes is 1532; the groups need 1536"},
      {"file name", [](auto& j) { j["files"][1]["name"] = "rank_7.bin"; }, "files[1] is 'rank_7.bin' (rank 1), expected rank_1.bin"},
      {"trainer.step not an integer", [](auto& j) { j["trainer"]["step"] = 1.5; }, "'trainer.step' must be an integer"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    const std::string err = manifest_error(j);
    EXPECT_NE(err.find("step_4/manifest.json: " + c.error), std::string::npos)
        << c.what << ": got '" << err << "', expected '" << c.error << "'";
  }
}

TEST(CheckpointManifest, ReadChecksTheStepAgainstTheDirectoryName) {
  const std::string run = temp_dir("dirstep");
  const RunPaths p(run);
  nlohmann::json j = sound_manifest(4).to_json();
  write_checkpoint(run, 4, j);
  EXPECT_EQ(Manifest::read(p.step_dir(4)).state.step, 4);
  EXPECT_EQ(Manifest::read(p.step_dir(4) + "/").state.step, 4);
  fs::create_directory_symlink("step_4", p.best_link());  // checkpoints/best -> step_4
  EXPECT_EQ(Manifest::read(p.best_link()).state.step, 4);
  fs::copy(p.step_dir(4), run + "/renamed");  // another name: the manifest alone decides
  EXPECT_EQ(Manifest::read(run + "/renamed").state.step, 4);
  j["trainer"]["step"] = 3, j["step"] = 3;  // consistent within itself, but in step_4
  write_checkpoint(run, 4, j);
  for (const std::string& dir : {p.step_dir(4), p.best_link()}) {
    try {
      Manifest::read(dir);
      ADD_FAILURE() << "no error for " << dir;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(dir + "/manifest.json: trainer.step 3 but the directory is step_4"),
                std::string::npos) << e.what();
    }
  }
  fs::remove_all(run);
}

TEST(CheckpointManifest, CheckpointProblemNamesTheUnsoundField) {
  const std::string run = temp_dir("problem");
  const RunPaths p(run);
  const std::string dir = write_checkpoint(run, 4, sound_manifest(4).to_json());
  EXPECT_EQ(checkpoint_problem(dir, false), "");
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> edits = {
      {[](auto& j) { j["trainer"]["step"] = -5; }, "trainer.step is -5; it must be >= 0"},
      {[](auto& j) { j["trainer"]["step"] = 3; }, "trainer.step 3 but the directory is step_4"},
      {[](auto& j) { j["stage"] = 9; }, "stage 9 is not 0-3"},
      {[](auto& j) { j["dtype"] = "bf16"; }, "dtype is \"bf16\""},
      {[](auto& j) { j["trainer"]["rng"] = 5; }, "trainer.rng is 5"},
      {[](auto& j) { j["groups"] = nlohmann::json::array(); }, "groups is empty"},
  };
  for (const auto& [edit, error] : edits) {
    nlohmann::json j = sound_manifest(4).to_json();
    edit(j);
    write_checkpoint(run, 4, j);
    const std::string problem = checkpoint_problem(dir, false);
    EXPECT_NE(problem.find(dir + "/manifest.json: " + error), std::string::npos) << problem;
    EXPECT_EQ(problem.find("rank 0: "), std::string::npos) << problem;  // no agreed prefix on a local check
  }
  fs::remove_all(run);
}

TEST(CheckpointPublish, LatestAndRetention) {
  const std::string run = temp_dir("publish");
  const RunPaths p(run);
  EXPECT_FALSE(find_latest(run).has_value());
  for (int64_t step : {2, 4, 6, 8, 10}) {
    prepare_tmp_dir(p, step);
    std::ofstream(p.tmp_dir(step) + "/" + kManifestName) << "{}";
    publish(p, step);
    EXPECT_EQ(*find_latest(run), p.step_dir(step));
    apply_retention(p, Retention{2, 4, {}}, step);
  }
  EXPECT_EQ(list_steps(p), (std::vector<int64_t>{4, 8, 10}));  // the last 2, and every multiple of 4
  // A crash leaves a temp dir: not listed, not `latest`, removed by the next save.
  prepare_tmp_dir(p, 12);
  EXPECT_EQ(list_steps(p).back(), 10);
  EXPECT_EQ(*find_latest(run), p.step_dir(10));
  prepare_tmp_dir(p, 14);
  EXPECT_FALSE(fs::exists(p.tmp_dir(12)));
  // Re-publishing an existing step replaces it.
  prepare_tmp_dir(p, 10);
  std::ofstream(p.tmp_dir(10) + "/" + kManifestName) << "{\"new\": 1}";
  publish(p, 10);
  EXPECT_EQ(read_small_file(p.step_dir(10) + "/" + kManifestName), "{\"new\": 1}");
  // ENOSPC while replacing `latest` after the rename: the save publishes nothing. A new step is gone again;
  // a re-saved step is the previous one again; `latest` names what it named before.
  const PublishFaults enospc_latest{{}, false, {Fault{FaultKind::EnospcAfterBytes, 0, -1, -1, FaultPoint::Latest}}};
  prepare_tmp_dir(p, 16);
  std::ofstream(p.tmp_dir(16) + "/" + kManifestName) << "{}";
  EXPECT_THROW(publish(p, 16, enospc_latest), SaveError);
  EXPECT_FALSE(fs::exists(p.step_dir(16)));
  EXPECT_EQ(read_small_file(p.latest_file()), "step_10\n");
  prepare_tmp_dir(p, 10);
  std::ofstream(p.tmp_dir(10) + "/" + kManifestName) << "{\"newer\": 1}";
  EXPECT_THROW(publish(p, 10, enospc_latest), SaveError);
  EXPECT_EQ(read_small_file(p.step_dir(10) + "/" + kManifestName), "{\"new\": 1}");
  EXPECT_EQ(read_small_file(p.latest_file()), "step_10\n");
  // `latest` naming a missing directory is a clear error.
  fs::remove_all(p.step_dir(10));
  EXPECT_THROW(find_latest(run), InputError);
  fs::remove_all(run);
}

// Retention by an eval metric: the best checkpoint survives keep_last, `best` links to it (ties keep the
// earlier step; a checkpoint without the metric is no candidate), and the link resolves as a checkpoint.
// A path beside a checkpoint, given where one is expected (--resume, --checkpoint, export), says which
// checkpoint to give: literal messages, with `latest` naming step_4 while a higher step_6 is on disk.
TEST(CheckpointPublish, APathBesideACheckpointNamesTheOneToGive) {
  const std::string run = temp_dir("beside");
  const RunPaths p(run);
  for (int64_t step : {4, 6}) {
    prepare_tmp_dir(p, step);
    std::ofstream(p.tmp_dir(step) + "/" + kManifestName) << "{}";
    publish(p, step);
  }
  std::ofstream(p.latest_file()) << "step_4\n";
  std::ofstream(run + "/metrics.jsonl") << "{}\n";
  const auto error_of = [](const std::string& dir) {
    try {
      Manifest::read(dir);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string step4 = p.step_dir(4);
  EXPECT_EQ(error_of(step4 + "/manifest.json"),
            step4 + "/manifest.json is not a checkpoint directory: it is a checkpoint's manifest; give its directory, " + step4);
  EXPECT_EQ(error_of(p.latest_file()), p.latest_file() + " is not a checkpoint directory: it is the file naming the "
                                       "newest checkpoint; give that checkpoint, " + step4);
  EXPECT_EQ(error_of(run), run + " is not a checkpoint directory: it is a run directory; its newest checkpoint is " + step4);
  EXPECT_EQ(error_of(p.root), p.root + " is not a checkpoint directory: it holds a run's checkpoints; the newest is " + step4);
  EXPECT_EQ(error_of(run + "/metrics.jsonl"),
            run + "/metrics.jsonl is not a checkpoint directory: it is a file; a checkpoint is a step_<N> directory");
  EXPECT_EQ(error_of(run + "/nothing"), "checkpoint directory " + run + "/nothing does not exist");
  fs::remove(p.latest_file());  // without `latest`: the highest complete step
  EXPECT_EQ(error_of(run), run + " is not a checkpoint directory: it is a run directory; its newest checkpoint is " + p.step_dir(6));
  fs::remove_all(run);
}

TEST(CheckpointPublish, RetentionKeepsTheBestByAMetric) {
  const std::string run = temp_dir("best");
  const RunPaths p(run);
  auto save = [&](int64_t step, const char* extra) {
    prepare_tmp_dir(p, step);
    std::ofstream(p.tmp_dir(step) + "/" + kManifestName) << "{\"trainer\": {\"extra\": " << extra << "}}";
    publish(p, step);
  };
  const Retention by_accuracy{1, 0, {"/eval/accuracy", true}};
  save(1, R"({"eval": {"accuracy": 0.5, "loss": 0.7}})");
  apply_retention(p, by_accuracy, 1);
  EXPECT_EQ(fs::read_symlink(p.best_link()), "step_1");
  save(2, R"({"eval": {"accuracy": 0.75, "loss": 0.69}})");
  apply_retention(p, by_accuracy, 2);
  save(3, R"({"eval": {"accuracy": 0.75, "loss": 0.6}})");  // a tie: the earlier stays the best
  apply_retention(p, by_accuracy, 3);
  save(4, R"({"model": "no eval at this step"})");
  apply_retention(p, by_accuracy, 4);
  EXPECT_EQ(list_steps(p), (std::vector<int64_t>{2, 4}));  // the last one, and the best
  EXPECT_EQ(fs::read_symlink(p.best_link()), "step_2");
  EXPECT_EQ(best_checkpoint(p, by_accuracy.best)->second, 0.75);
  EXPECT_EQ(resolve_checkpoint_dir(p.best_link()), p.step_dir(2));
  // Lower is better for a loss; the link moves, and the old best goes under keep_last.
  save(5, R"({"eval": {"accuracy": 0.25, "loss": 0.5}})");
  apply_retention(p, {1, 0, {"/eval/loss", false}}, 5);
  EXPECT_EQ(fs::read_symlink(p.best_link()), "step_5");
  EXPECT_EQ(list_steps(p), (std::vector<int64_t>{5}));
  // Without a best metric the link is left alone until its checkpoint is removed.
  save(6, "{}");
  apply_retention(p, {1, 0, {}}, 6);
  EXPECT_FALSE(fs::exists(p.best_link()));
  EXPECT_FALSE(fs::is_symlink(p.best_link()));
  fs::remove_all(run);
}
