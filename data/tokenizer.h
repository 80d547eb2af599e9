// Qwen2/Qwen3-family tokenizer read from a Hugging Face tokenizer.json: added tokens matched first,
// NFC, regex pre-tokenizer, byte-level BPE; no BOS or EOS added. Decode maps ids back to bytes.
// One Tokenizer per thread: encode() fills a word cache and reuses scratch buffers.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/bpe_model.h"
#include "data/pretokenizer.h"

namespace zero::data {

struct TokenizerJson;  // data/tokenizer_json.h

class Tokenizer {
 public:
  // Loads tokenizer.json; reads eos/pad token names from tokenizer_config.json in the same folder when
  // present (else "<|im_end|>" / "<|endoftext|>"). Throws InputError/ConfigError naming the file.
  static Tokenizer from_file(const std::string& path);
  // The tokenizer.json text itself (`name` stands for the file in errors); eos/pad take their defaults.
  static Tokenizer from_json_text(const std::string& text, const std::string& name);

  // Appends the ids of `text` (valid UTF-8; InputError otherwise) to `out`.
  void encode_into(std::string_view text, std::vector<int32_t>& out);
  std::vector<int32_t> encode(std::string_view text) {
    std::vector<int32_t> ids;
    encode_into(text, ids);
    return ids;
  }
  // Concatenated bytes of the ids (added tokens as their text unless skip_special drops special ones).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  int32_t token_id(std::string_view token) const;  // vocab or added token, -1 when unknown
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_text_.size()); }
  int32_t eos_id() const { return eos_id_; }  // -1 when the tokenizer has none
  int32_t pad_id() const { return pad_id_; }
  const std::string& path() const { return path_; }

  // Word-cache statistics (pieces looked up / found), for benchmarks.
  uint64_t cache_lookups() const { return cache_lookups_; }
  uint64_t cache_hits() const { return cache_hits_; }
  void clear_cache();

 private:
  struct AddedToken {
    std::string text;
    int32_t id;
    bool special;
  };
  struct Span {
    uint32_t offset, len;
  };
  Tokenizer(std::string path, BpeModel bpe, Pretokenizer pre) : path_(std::move(path)), bpe_(std::move(bpe)),
                                                                pre_(std::move(pre)) {}
  static Tokenizer from_json(const TokenizerJson& file, const std::string& path, const std::string& eos,
                             const std::string& pad);
  void encode_plain(std::string_view text, std::vector<int32_t>& out);
  void encode_piece(std::string_view piece, std::vector<int32_t>& out);
  // Next added-token match at or after `from`: leftmost, then longest. Returns false when none.
  bool find_added(std::string_view text, size_t from, size_t& at, const AddedToken*& tok) const;

  std::string path_;
  BpeModel bpe_;
  Pretokenizer pre_;
  std::vector<AddedToken> added_;           // longest first, so the first hit at a position is longest
  bool added_first_byte_[256] = {};
  std::vector<std::string> id_to_text_;     // bytes of every id (BPE tokens and added tokens)
  std::vector<uint8_t> id_special_;
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> added_by_text_;
  int32_t eos_id_ = -1, pad_id_ = -1;

  // Cache of pre-tokenized words -> ids (flat pool); reset when it grows past a bound.
  std::unordered_map<std::string, Span, StringViewHash, std::equal_to<>> cache_;
  std::vector<int32_t> cache_pool_;
  uint64_t cache_lookups_ = 0, cache_hits_ = 0;
  std::string nfc_;                          // scratch
  std::vector<std::string_view> pieces_;     // scratch
};

}  // namespace zero::data
