// Single-process pieces of the sharded checkpoint: fault-spec parsing, the resharding plan (every real
// element read exactly once, from the right file), the manifest's JSON round trip and version check,
// durable writes with an injected ENOSPC, atomic publish / `latest` / retention.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/fault.h"
#include "checkpoint/full_tensors.h"
#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "checkpoint/publish.h"
#include "checkpoint/reshard_plan.h"

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
  m.files = {{"rank_0.bin", 0, 84, 0x0123456789abcdefULL}, {"rank_1.bin", 1, 84, 42}};
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

TEST(CheckpointPublish, LatestAndRetention) {
  const std::string run = temp_dir("publish");
  const RunPaths p(run);
  EXPECT_FALSE(find_latest(run).has_value());
  for (int64_t step : {2, 4, 6, 8, 10}) {
    prepare_tmp_dir(p, step);
    std::ofstream(p.tmp_dir(step) + "/" + kManifestName) << "{}";
    publish(p, step);
    EXPECT_EQ(*find_latest(run), p.step_dir(step));
    apply_retention(p, Retention{2, 4}, step);
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
