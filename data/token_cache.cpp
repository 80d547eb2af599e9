// Cache key hashing and the cache file format:
//   "ZDTCACHE" | u32 version | u64 key | u64 payload_bytes | u64 XXH3-64(payload) | payload
//   payload = u64 meta_len | meta JSON (end_id, pad_id, stats) | u64 n_offsets | i64 offsets[] |
//             u64 n_tokens | i32 tokens[] | u64 n_margins | f32 margins[]   (little-endian, as the host
//             writes it; n_margins is 0 or the pair count)
#include "data/token_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/check.h"
#include "core/host_name.h"
#include "data/line_reader.h"
#include "data/tokenizer.h"

namespace zero::data {

namespace {

constexpr char kMagic[8] = {'Z', 'D', 'T', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kVersion = 2;  // 2: the margins

void hash_file(XXH3_state_t* st, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ZERO_REQUIRE(f.good(), InputError, "{}: cannot open", path);
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), std::streamsize(buf.size()));
    XXH3_64bits_update(st, buf.data(), size_t(f.gcount()));
  }
}

template <typename T>
void put(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Bounds-checked reader over the payload: a truncated or garbled file fails, never reads past the end.
struct Cursor {
  const char* p;
  const char* end;
  bool ok = true;
  template <typename T>
  T get() {
    T v{};
    if (size_t(end - p) < sizeof v) {
      ok = false;
      return v;
    }
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  template <typename T>
  bool get_array(std::vector<T>& out, uint64_t n) {
    if (!ok || n > uint64_t(end - p) / sizeof(T)) return ok = false;
    out.resize(n);
    if (n > 0) std::memcpy(out.data(), p, n * sizeof(T));  // an empty vector's data() may be null
    p += n * sizeof(T);
    return true;
  }
};

}  // namespace

const char* cache_status_name(CacheStatus s) {
  switch (s) {
    case CacheStatus::Hit: return "hit";
    case CacheStatus::Missing: return "missing";
    case CacheStatus::Stale: return "stale";
    case CacheStatus::Corrupt: return "corrupt";
  }
  return "?";
}

uint64_t dataset_cache_key(const DataConfig& config, const std::string& tokenizer_path) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  hash_file(st, tokenizer_path);
  const auto tok_cfg = (std::filesystem::path(tokenizer_path).parent_path() / "tokenizer_config.json").string();
  if (std::filesystem::exists(tok_cfg)) hash_file(st, tok_cfg);
  for (const auto& f : expand_inputs(config.files)) {
    const uint64_t marker = 0xF11Eull;  // separates files so content cannot shift between them unnoticed
    XXH3_64bits_update(st, &marker, sizeof marker);
    hash_file(st, f);
  }
  const std::string cfg = config.to_json().dump();
  XXH3_64bits_update(st, cfg.data(), cfg.size());
  const uint64_t key = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return key;
}

bool load_dataset_cache(const std::string& path, uint64_t key, PairDataset& out, CacheStatus& status) {
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) {
    status = CacheStatus::Missing;
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Cursor c{bytes.data(), bytes.data() + bytes.size()};
  if (bytes.size() < 8 + 4 + 8 * 3 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    status = CacheStatus::Corrupt;
    return false;
  }
  c.p += 8;
  const auto version = c.get<uint32_t>();
  const auto file_key = c.get<uint64_t>();
  if (version != kVersion || file_key != key) {
    status = CacheStatus::Stale;
    return false;
  }
  const auto payload_bytes = c.get<uint64_t>();
  const auto checksum = c.get<uint64_t>();
  if (payload_bytes != uint64_t(c.end - c.p) || XXH3_64bits(c.p, payload_bytes) != checksum) {
    status = CacheStatus::Corrupt;
    return false;
  }
  PairDataset ds;
  const auto meta_len = c.get<uint64_t>();
  std::vector<char> meta;
  c.get_array(meta, meta_len);
  const auto n_off = c.get<uint64_t>();
  c.get_array(ds.offsets, n_off);
  const auto n_tok = c.get<uint64_t>();
  c.get_array(ds.tokens, n_tok);
  const auto n_margins = c.get<uint64_t>();
  c.get_array(ds.margins, n_margins);
  const nlohmann::json m = nlohmann::json::parse(meta.begin(), meta.end(), nullptr, false);
  // A payload that passed its checksum but does not hold a dataset was written by a broken build.
  if (!c.ok || m.is_discarded() || ds.offsets.empty() || ds.offsets.size() % 2 != 1 ||
      ds.offsets.back() != int64_t(ds.tokens.size()) || (n_margins != 0 && int64_t(n_margins) != ds.num_pairs())) {
    status = CacheStatus::Corrupt;
    return false;
  }
  try {
    ds.end_id = m.at("end_id").get<int32_t>();
    ds.pad_id = m.at("pad_id").get<int32_t>();
    ds.stats = DataStats::from_json(m.at("stats"));
  } catch (const nlohmann::json::exception&) {
    status = CacheStatus::Corrupt;
    return false;
  }
  out = std::move(ds);
  status = CacheStatus::Hit;
  return true;
}

void save_dataset_cache(const std::string& path, uint64_t key, const PairDataset& data) {
  std::string payload;
  const std::string meta =
      nlohmann::json{{"end_id", data.end_id}, {"pad_id", data.pad_id}, {"stats", data.stats.to_json()}}.dump();
  put(payload, uint64_t(meta.size()));
  payload += meta;
  put(payload, uint64_t(data.offsets.size()));
  payload.append(reinterpret_cast<const char*>(data.offsets.data()), data.offsets.size() * sizeof(int64_t));
  put(payload, uint64_t(data.tokens.size()));
  payload.append(reinterpret_cast<const char*>(data.tokens.data()), data.tokens.size() * sizeof(int32_t));
  put(payload, uint64_t(data.margins.size()));
  payload.append(reinterpret_cast<const char*>(data.margins.data()), data.margins.size() * sizeof(float));

  std::string head(kMagic, 8);
  put(head, kVersion);
  put(head, key);
  put(head, uint64_t(payload.size()));
  put(head, uint64_t(XXH3_64bits(payload.data(), payload.size())));

  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  // A temporary of this writer's own: runs that share data.cache_dir (a sweep's jobs, two runs started
  // together) may write the same cache at once, and one's rename must not take the other's half-written file.
  static std::atomic<uint64_t> writes{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}.{}", path, host_name(), ::getpid(), writes++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    ZERO_REQUIRE(f.good(), InputError, "{}: cannot write the token cache", tmp);
    f.write(head.data(), std::streamsize(head.size()));
    f.write(payload.data(), std::streamsize(payload.size()));
    ZERO_REQUIRE(f.good(), InputError, "{}: write failed (disk full?)", tmp);
  }
  std::filesystem::rename(tmp, path);
}

PairDataset load_or_build_dataset(const DataConfig& config, Tokenizer& tokenizer, const std::string& cache_path,
                                  CacheStatus* status) {
  const uint64_t key = dataset_cache_key(config, tokenizer.path());
  PairDataset ds;
  CacheStatus st = CacheStatus::Missing;
  if (!load_dataset_cache(cache_path, key, ds, st)) {
    ds = build_pair_dataset(config, tokenizer);
    save_dataset_cache(cache_path, key, ds);
  }
  if (status) *status = st;
  return ds;
}

}  // namespace zero::data
