// BPE vocabulary/merges loading (both merge encodings) and the heap-based merge loop.
#include "data/bpe_model.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/byte_level.h"

namespace zero::data {

namespace {
uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const BpeLists& lists, const std::string& where) {
  ZERO_REQUIRE(model.is_object(), InputError, "{}: 'model' is not an object", where);
  const std::string type = model.value("type", std::string("BPE"));
  ZERO_REQUIRE(type == "BPE", ConfigError, "{}: model type '{}' is not supported (only byte-level BPE)",
               where, type);
  ZERO_REQUIRE(lists.has_vocab, InputError, "{}: model has no 'vocab' object", where);
  ZERO_REQUIRE(lists.has_merges, InputError, "{}: model has no 'merges' array", where);
  // Options that change how words are split into symbols: Qwen uses none of them.
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string())
      ZERO_REQUIRE(model[key].get<std::string>().empty(), ConfigError, "{}: BPE option '{}' is not supported",
                   where, key);
  }
  ZERO_REQUIRE(!model.value("byte_fallback", false), ConfigError, "{}: BPE byte_fallback is not supported",
               where);

  const size_t vocab_size = lists.vocab.size();
  id_to_bytes_.resize(vocab_size);
  bytes_to_id_.reserve(vocab_size * 2);
  std::string raw;
  std::vector<uint8_t> assigned(vocab_size, 0);  // a repeated id would decode as another token's bytes
  for (const BpeLists::VocabEntry& e : lists.vocab) {
    ZERO_REQUIRE(e.is_integer, InputError, "{}: vocab entry '{}' has no integer id", where, e.token);
    ZERO_REQUIRE(e.id >= 0 && e.id < int64_t(vocab_size), InputError,
                 "{}: vocab id {} of '{}' is outside 0..{} (ids must be dense)", where, e.id, e.token,
                 vocab_size - 1);
    ZERO_REQUIRE(byte_level_decode(e.token, raw), ConfigError,
                 "{}: vocab token '{}' is not in the byte-level alphabet (not a byte-level BPE tokenizer)",
                 where, e.token);
    ZERO_REQUIRE(!assigned[e.id], InputError,
                 "{}: vocab id {} of '{}' is also given to another token (ids must be unique)", where, e.id,
                 e.token);
    assigned[e.id] = 1;
    const bool fresh = bytes_to_id_.emplace(raw, int32_t(e.id)).second;
    ZERO_REQUIRE(fresh, InputError, "{}: vocab token '{}' is given twice", where, e.token);
    id_to_bytes_[e.id] = raw;
  }
  for (int b = 0; b < 256; ++b) {
    const char byte = char(b);
    const auto it = bytes_to_id_.find(std::string_view(&byte, 1));
    ZERO_REQUIRE(it != bytes_to_id_.end(), ConfigError, "{}: vocab lacks the single byte 0x{:02x}", where, b);
    byte_id_[b] = it->second;
  }

  merges_.reserve(lists.merges.size() * 2);
  std::string a, b, joined;
  for (size_t rank = 0; rank < lists.merges.size(); ++rank) {
    const BpeLists::MergeEntry& m = lists.merges[rank];
    std::string_view left = m.left, right = m.right;
    if (m.form == BpeLists::MergeEntry::kString) {
      const size_t sp = left.find(' ');
      ZERO_REQUIRE(sp != std::string::npos && left.find(' ', sp + 1) == std::string::npos, InputError,
                   "{}: merge {} '{}' is not two tokens separated by one space", where, rank, m.left);
      right = left.substr(sp + 1);
      left = left.substr(0, sp);
    }
    ZERO_REQUIRE(m.form != BpeLists::MergeEntry::kBad, InputError,
                 "{}: merge {} is neither [\"a\", \"b\"] nor \"a b\"", where, rank);
    ZERO_REQUIRE(byte_level_decode(left, a) && byte_level_decode(right, b), ConfigError,
                 "{}: merge {} uses characters outside the byte-level alphabet", where, rank);
    joined.assign(a).append(b);
    const int32_t ia = id_of(a), ib = id_of(b), inew = id_of(joined);
    ZERO_REQUIRE(ia >= 0 && ib >= 0 && inew >= 0, InputError,
                 "{}: merge {} ('{}' '{}') refers to a token missing from the vocab", where, rank, left, right);
    // A repeated pair keeps its last rank, as tokenizers collects its merge map.
    merges_.insert_or_assign(pair_key(ia, ib), Merge{int32_t(rank), inew});
  }
  num_merges_ = static_cast<int32_t>(lists.merges.size());
}

int32_t BpeModel::id_of(std::string_view bytes) const {
  const auto it = bytes_to_id_.find(bytes);
  return it == bytes_to_id_.end() ? -1 : it->second;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  const auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) {
  const int32_t n = static_cast<int32_t>(word.size());
  if (n == 0) return;
  if (n == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(word[0])]);
    return;
  }
  symbols_.resize(n);
  for (int32_t i = 0; i < n; ++i)
    symbols_[i] = Symbol{byte_id_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, 1};

  // Min-heap on (rank, pos): the same order as tokenizers' Word::merge_all, so ties break identically.
  auto later = [](const Candidate& x, const Candidate& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  heap_.clear();
  for (int32_t i = 0; i + 1 < n; ++i)
    if (const Merge* m = find_merge(symbols_[i].id, symbols_[i + 1].id)) heap_.push_back({m->rank, i, m->new_id});
  std::make_heap(heap_.begin(), heap_.end(), later);

  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Candidate top = heap_.back();
    heap_.pop_back();
    Symbol& cur = symbols_[top.pos];
    if (cur.len == 0 || cur.next < 0) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = symbols_[next_pos];
    // Stale candidate: one side has changed since it was queued.
    const Merge* m = find_merge(cur.id, right.id);
    if (!m || m->rank != top.rank || m->new_id != top.new_id) continue;

    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols_[next_pos].len = 0;
    if (right.next >= 0) symbols_[right.next].prev = top.pos;

    if (cur.prev >= 0)
      if (const Merge* pm = find_merge(symbols_[cur.prev].id, cur.id)) {
        heap_.push_back({pm->rank, cur.prev, pm->new_id});
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    if (cur.next >= 0)
      if (const Merge* nm = find_merge(cur.id, symbols_[cur.next].id)) {
        heap_.push_back({nm->rank, top.pos, nm->new_id});
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
  }
  for (int32_t i = 0; i >= 0; i = symbols_[i].next) out.push_back(symbols_[i].id);
}

}  // namespace zero::data
