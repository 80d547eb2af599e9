// Byte-level BPE model: vocabulary and merge ranks, and the merge loop for one pre-tokenized word.
// Works on raw bytes (the vocabulary is converted from the byte-level alphabet at load), so the
// encoder never builds alphabet strings per word. Not thread-safe: it reuses scratch buffers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/memory.h"

namespace zero::data {

// The vocabulary and merges of a tokenizer.json's "model" object, in file order, as read_tokenizer_json
// (tokenizer_json.h) streams them. A list that is not of the expected kind (vocab not an object, merges not an
// array) is not streamed: it stays in the JSON tree, and its flag is false.
struct BpeLists {
  struct VocabEntry {
    std::string token;  // in the byte-level alphabet, as written
    int64_t id;
    bool is_integer;  // false: the value was not an integer (id is then 0)
  };
  // A merge as ["a", "b"] (kPair: left, right), as the legacy "a b" string (kString: the whole of it in
  // left), or anything else (kBad).
  struct MergeEntry {
    enum Form { kPair, kString, kBad } form;
    std::string left, right;
  };
  bool has_vocab = false, has_merges = false;
  // On host_pages_allocate (core/memory.h): Qwen3's lists grow by doubling to about 30 MB, which would
  // otherwise fault in 4 KiB at a time in every process that loads the tokenizer.
  HostVector<VocabEntry> vocab;
  HostVector<MergeEntry> merges;
};

// A hash for maps keyed by std::string that are looked up by string_view, with no std::string made for each
// lookup (with std::equal_to<>).
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class BpeModel {
 public:
  // Builds from the "model" object of a tokenizer.json (type BPE and its options) and its vocab and merges
  // (merges as ["a","b"] pairs or "a b" strings), as read_tokenizer_json gives them. `where` names the file in
  // error messages.
  BpeModel(const nlohmann::json& model, const BpeLists& lists, const std::string& where);

  // Appends the ids of one word (raw bytes) to `out`, merging as Hugging Face's BPE does: lowest rank
  // first, leftmost among equal ranks.
  void encode_word(std::string_view word, std::vector<int32_t>& out);

  // Raw bytes of a vocabulary id; id must be < vocab_size().
  const std::string& token_bytes(int32_t id) const { return id_to_bytes_[id]; }
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_bytes_.size()); }
  int32_t num_merges() const { return num_merges_; }
  // Id of a token given in raw bytes, or -1.
  int32_t id_of(std::string_view bytes) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    int32_t len;  // 0 once merged into its left neighbour
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
  };
  const Merge* find_merge(int32_t a, int32_t b) const;

  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> bytes_to_id_;
  std::vector<std::string> id_to_bytes_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_id_[256];
  int32_t num_merges_ = 0;
  std::vector<Symbol> symbols_;     // scratch
  std::vector<Candidate> heap_;     // scratch
};

}  // namespace zero::data
