// Tokenized preference pairs in two flat arrays: sequence 2i = chosen of pair i, 2i+1 = rejected.
// Each sequence ends with the end token; sequences over max_len are truncated or their pair dropped.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/hh_rlhf.h"

namespace zero::data {

class Tokenizer;

enum class TooLongPolicy : uint8_t {
  TruncateKeepEnd,    // keep the last max_len tokens (the answers differ at the end); ends on the end token
  TruncateKeepStart,  // keep the first max_len - 1 tokens, then the end token
  Drop,               // drop the whole pair
};

struct DataConfig {
  std::vector<std::string> files;  // paths or globs, .jsonl or .jsonl.gz
  HhReaderConfig reader;
  std::string end_token = "<|im_end|>";  // appended to every sequence; must not be the pad token
  int64_t max_len = 2048;                // tokens per sequence, end token included
  TooLongPolicy too_long = TooLongPolicy::TruncateKeepEnd;

  // Everything that changes the tokenized result except file contents (for the cache key).
  nlohmann::json to_json() const;
};

struct DataStats {
  ReadStats read;
  int64_t pairs_truncated = 0;  // pairs with at least one truncated sequence
  int64_t pairs_dropped_too_long = 0;
  std::string report() const;
  nlohmann::json to_json() const;
  static DataStats from_json(const nlohmann::json& j);
};

struct PairDataset {
  std::vector<int32_t> tokens;   // all sequences back to back
  std::vector<int64_t> offsets;  // [2 * num_pairs + 1]: sequence s is tokens[offsets[s], offsets[s+1])
  std::vector<float> margins;    // [num_pairs] with a margin field (reader.margin_field), else empty
  int32_t end_id = -1;
  int32_t pad_id = -1;
  DataStats stats;

  int64_t num_pairs() const { return offsets.empty() ? 0 : int64_t(offsets.size() - 1) / 2; }
  int64_t seq_len(int64_t s) const { return offsets[s + 1] - offsets[s]; }
  std::span<const int32_t> seq(int64_t s) const {
    return {tokens.data() + offsets[s], size_t(offsets[s + 1] - offsets[s])};
  }
  // Keeps the first `pairs` pairs (all if fewer), their tokens and margins.
  void keep_first(int64_t pairs);
  // Removes the first `pairs` pairs (all if fewer), their tokens and margins: pair p becomes pair p - pairs.
  void drop_first(int64_t pairs);
  // Appends other's pairs after this one's (pair p of other becomes num_pairs() + p), their margins and read
  // counts. Both from the same tokenizer and end token (InternalError otherwise); margins in both or neither.
  void append(const PairDataset& other);
  // The first tokens the two answers of pair p have in common (their prompt, typically), at most the shorter
  // answer's length - 1, so each keeps a token of its own (the end token its reward is read at).
  int64_t common_prefix(int64_t p) const;
};

// Appends tokenized pairs to a dataset under the config's end token and length policy, one pair at a
// time: build_pair_dataset's inner step, and `pmtrain score`'s (which reports on every input line).
class PairEncoder {
 public:
  // Sets out's end and pad ids (ConfigError as resolve_end_id); out must outlive the encoder.
  PairEncoder(const DataConfig& config, Tokenizer& tokenizer, PairDataset& out);
  // false when the pair was dropped as longer than max_len (TooLongPolicy::Drop); counted in out.stats.
  bool add(const PairText& pair);

 private:
  const DataConfig& config_;
  Tokenizer& tokenizer_;
  PairDataset& out_;
  std::vector<int32_t> ids_[2];
};

// Reads config.files (globs expanded), tokenizes and applies the length policy. Pad id is the
// tokenizer's pad token; ConfigError when the end token is unknown or equals the pad token.
PairDataset build_pair_dataset(const DataConfig& config, Tokenizer& tokenizer);

// Resolves and checks the end token (shared by the builder and the cache).
int32_t resolve_end_id(const DataConfig& config, const Tokenizer& tokenizer);

}  // namespace zero::data
