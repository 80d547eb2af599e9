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

namespace zero::data {

class BpeModel {
 public:
  // Builds from the "model" object of a tokenizer.json (type BPE, vocab, merges as ["a","b"] pairs or
  // "a b" strings). `where` names the file in error messages.
  BpeModel(const nlohmann::json& model, const std::string& where);

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

  std::unordered_map<std::string, int32_t> bytes_to_id_;
  std::vector<std::string> id_to_bytes_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_id_[256];
  int32_t num_merges_ = 0;
  std::vector<Symbol> symbols_;     // scratch
  std::vector<Candidate> heap_;     // scratch
};

}  // namespace zero::data
