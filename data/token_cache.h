// On-disk cache of a tokenized PairDataset, keyed by xxhash (XXH3-64) of the tokenizer files, the data
// files' bytes and the data config, so a second run skips tokenization. The file carries its key and a
// checksum of its payload: a stale (other key) or corrupt (bad checksum, truncated) file is rebuilt.
#pragma once
#include <cstdint>
#include <string>

#include "data/pair_dataset.h"

namespace zero::data {

class Tokenizer;

enum class CacheStatus : uint8_t { Hit, Missing, Stale, Corrupt };
const char* cache_status_name(CacheStatus s);

// Key over tokenizer.json (+ tokenizer_config.json beside it), every data file (after glob expansion,
// in order) and config.to_json(). Paths themselves are not part of it: moving the repo keeps the cache.
uint64_t dataset_cache_key(const DataConfig& config, const std::string& tokenizer_path);

// Loads `path` if it holds `key` and passes its checksum; otherwise reports why (status) and returns false.
bool load_dataset_cache(const std::string& path, uint64_t key, PairDataset& out, CacheStatus& status);
// Writes atomically (a temporary file of this writer's own, then rename): writers of one path at once, in
// threads or processes, each publish a whole file and the last rename wins.
void save_dataset_cache(const std::string& path, uint64_t key, const PairDataset& data);

// The cache in front of build_pair_dataset: hit -> load, else build, save and report the reason.
PairDataset load_or_build_dataset(const DataConfig& config, Tokenizer& tokenizer, const std::string& cache_path,
                                  CacheStatus* status = nullptr);

}  // namespace zero::data
