// Tokenized cache: second run is a hit with identical contents; a changed config or data file is
// stale, a flipped byte or a cut file is corrupt; both are rebuilt, never trusted.
#include "data/token_cache.h"

#include <atomic>
#include <thread>
#include <vector>

#include "data/tokenizer.h"
#include "test_util.h"

namespace zero::data {
namespace {

using test::TempDir;

using test::qwen;

void expect_same(const PairDataset& a, const PairDataset& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.end_id, b.end_id);
  EXPECT_EQ(a.pad_id, b.pad_id);
  EXPECT_EQ(a.stats.to_json(), b.stats.to_json());
}

TEST(TokenCache, HitStaleAndCorrupt) {
  TempDir dir;
  std::filesystem::copy_file(test::hh_test(), dir.file("test.jsonl.gz"));
  DataConfig cfg;
  cfg.files = {dir.file("*.jsonl.gz")};
  cfg.max_len = 256;
  const std::string cache = dir.file("cache/test.bin");
  CacheStatus st = CacheStatus::Hit;

  const PairDataset built = load_or_build_dataset(cfg, qwen(), cache, &st);
  EXPECT_EQ(st, CacheStatus::Missing);
  EXPECT_EQ(built.num_pairs(), 221);
  EXPECT_GT(built.stats.pairs_truncated, 0);  // some transcripts exceed 256 tokens
  expect_same(built, build_pair_dataset(cfg, qwen()));

  const PairDataset again = load_or_build_dataset(cfg, qwen(), cache, &st);
  EXPECT_EQ(st, CacheStatus::Hit);
  expect_same(built, again);

  // Another config -> another key -> the file is stale and rebuilt with the new setting.
  cfg.max_len = 128;
  const PairDataset shorter = load_or_build_dataset(cfg, qwen(), cache, &st);
  EXPECT_EQ(st, CacheStatus::Stale);
  for (int64_t s = 0; s < 2 * shorter.num_pairs(); ++s) EXPECT_LE(shorter.seq_len(s), 128);
  load_or_build_dataset(cfg, qwen(), cache, &st);
  EXPECT_EQ(st, CacheStatus::Hit);

  // Flip one byte in the middle of the token payload: checksum catches it.
  {
    std::fstream f(cache, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = f.tellg();
    f.seekp(size / 2);
    char c = 0;
    f.seekg(size / 2);
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(size / 2);
    f.write(&c, 1);
  }
  expect_same(load_or_build_dataset(cfg, qwen(), cache, &st), shorter);
  EXPECT_EQ(st, CacheStatus::Corrupt);
  EXPECT_EQ((load_or_build_dataset(cfg, qwen(), cache, &st), st), CacheStatus::Hit);

  // A cut file (crash while copying) is corrupt too.
  std::filesystem::resize_file(cache, std::filesystem::file_size(cache) - 100);
  load_or_build_dataset(cfg, qwen(), cache, &st);
  EXPECT_EQ(st, CacheStatus::Corrupt);

  // Changing a data file's bytes changes the key.
  const uint64_t k1 = dataset_cache_key(cfg, test::tokenizer_json());
  test::write_gz(dir.file("more.jsonl.gz"), "{\"chosen\": \"a\", \"rejected\": \"b\"}\n");
  const uint64_t k2 = dataset_cache_key(cfg, test::tokenizer_json());
  EXPECT_NE(k1, k2);
  const PairDataset more = load_or_build_dataset(cfg, qwen(), cache, &st);
  EXPECT_EQ(st, CacheStatus::Stale);
  EXPECT_EQ(more.num_pairs(), 222);

  // So does each reader setting that changes the texts.
  DataConfig prompted = cfg;
  prompted.reader.prompt_field = "prompt";
  EXPECT_NE(dataset_cache_key(prompted, test::tokenizer_json()), k2);
  DataConfig chat = cfg;
  chat.reader.mode = TextMode::Chat;
  EXPECT_NE(dataset_cache_key(chat, test::tokenizer_json()), k2);
}

// Two runs sharing data.cache_dir start together and both write the cache: each save publishes a whole file
// (a shared temporary name let one rename the other's half-written file, and the other's rename then threw).
TEST(TokenCache, WritersAtOnceEachPublishAWholeFile) {
  TempDir dir;
  DataConfig cfg;
  cfg.files = {test::hh_test()};
  cfg.max_len = 256;
  const PairDataset ds = build_pair_dataset(cfg, qwen());
  const std::string cache = dir.file("cache/test.bin");
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w)
    writers.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        try {
          save_dataset_cache(cache, 42, ds);
        } catch (const std::exception& e) {
          if (failures++ == 0) ADD_FAILURE() << e.what();
        }
      }
    });
  for (auto& t : writers) t.join();
  EXPECT_EQ(failures.load(), 0);
  PairDataset loaded;
  CacheStatus st = CacheStatus::Missing;
  ASSERT_TRUE(load_dataset_cache(cache, 42, loaded, st));
  expect_same(loaded, ds);
  int left = 0;  // no temporary left behind
  for (const auto& e : std::filesystem::directory_iterator(dir.file("cache"))) left += e.path() != cache;
  EXPECT_EQ(left, 0);
}

TEST(TokenCache, GarbageFileIsCorruptNotACrash) {
  TempDir dir;
  test::write_text(dir.file("c.bin"), "ZDTCACHE short");
  PairDataset ds;
  CacheStatus st = CacheStatus::Hit;
  EXPECT_FALSE(load_dataset_cache(dir.file("c.bin"), 1, ds, st));
  EXPECT_NE(st, CacheStatus::Hit);
  test::write_text(dir.file("d.bin"), std::string(4096, 'x'));
  EXPECT_FALSE(load_dataset_cache(dir.file("d.bin"), 1, ds, st));
  EXPECT_EQ(st, CacheStatus::Corrupt);
  EXPECT_FALSE(load_dataset_cache(dir.file("none.bin"), 1, ds, st));
  EXPECT_EQ(st, CacheStatus::Missing);
}

}  // namespace
}  // namespace zero::data
