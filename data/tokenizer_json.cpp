// The SAX reader of tokenizer.json (tokenizer_json.h): a tree for all but the model's vocab and merges,
// which stream into BpeLists.
#include "data/tokenizer_json.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace zero::data {

namespace {

using json = nlohmann::json;

class Reader final : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJson& out, const std::string& name) : out_(out), name_(name) {}

  bool null() override { return scalar(nullptr); }
  bool boolean(bool v) override { return scalar(v); }
  bool number_integer(number_integer_t v) override { return integer(int64_t(v), json(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(int64_t(std::min<number_unsigned_t>(v, std::numeric_limits<int64_t>::max())), json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return scalar(v); }
  bool binary(binary_t& v) override { return scalar(json::binary(v)); }  // never in JSON text
  bool string(string_t& v) override {
    if (stream_ == Stream::kMerges && skip_ == 0) {
      if (in_merge_) parts_.push_back(std::move(v));
      else out_.lists.merges.push_back({BpeLists::MergeEntry::kString, std::move(v), {}});
      return true;
    }
    return scalar(std::move(v));
  }
  bool key(string_t& k) override {
    if (stream_ == Stream::kVocab && skip_ == 0) token_ = std::move(k);
    else if (stream_ == Stream::kNone) key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (stream_ != Stream::kNone) return open_in_stream();
    if (in_model() && key_ == "vocab") {
      stream_ = Stream::kVocab;
      out_.lists.vocab.clear();
      return true;
    }
    const bool model = open_.size() == 1 && open_[0]->is_object() && key_ == "model";
    open_.push_back(put(json::object()));
    if (model) model_ = open_.back(), out_.lists = {};  // a repeated "model": the last one counts
    return true;
  }
  bool start_array(std::size_t) override {
    if (stream_ != Stream::kNone) return open_in_stream(/*merge=*/true);
    if (in_model() && key_ == "merges") {
      stream_ = Stream::kMerges;
      out_.lists.merges.clear();
      return true;
    }
    open_.push_back(put(json::array()));
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw InputError(bad_json_message(name_, "tokenizer.json", e));
  }

 private:
  enum class Stream { kNone, kVocab, kMerges };

  bool in_model() const { return model_ != nullptr && !open_.empty() && open_.back() == model_; }

  // A value for the tree: the root, the next element of the open array, or the pending key of the open object
  // (a repeated key: the last value wins, as nlohmann's own parser keeps it).
  json* put(json v) {
    if (open_.empty()) {
      out_.tree = std::move(v);
      return &out_.tree;
    }
    json& top = *open_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    if (open_.back() == model_ && key_ == "vocab") out_.lists.has_vocab = false, out_.lists.vocab.clear();
    if (open_.back() == model_ && key_ == "merges") out_.lists.has_merges = false, out_.lists.merges.clear();
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }

  bool scalar(json v) {
    if (stream_ == Stream::kNone) return put(std::move(v)), true;
    if (skip_ > 0) return true;
    bad_entry();
    return true;
  }
  bool integer(int64_t id, json v) {
    if (stream_ == Stream::kVocab && skip_ == 0) {
      out_.lists.vocab.push_back({std::move(token_), id, true});
      return true;
    }
    return scalar(std::move(v));
  }
  // A value where a stream wants another kind: a vocab value that is not an integer, a merge that is neither
  // a string nor an array, or anything but a string inside a merge's array.
  void bad_entry() {
    if (stream_ == Stream::kVocab) out_.lists.vocab.push_back({std::move(token_), 0, false});
    else if (in_merge_) merge_bad_ = true;
    else out_.lists.merges.push_back({BpeLists::MergeEntry::kBad, {}, {}});
  }
  // A container inside a stream: a merge's array, or something to skip whole (counted by skip_).
  bool open_in_stream(bool merge = false) {
    if (skip_ > 0) return ++skip_, true;
    if (merge && stream_ == Stream::kMerges && !in_merge_) {
      in_merge_ = true, merge_bad_ = false;
      parts_.clear();
      return true;
    }
    bad_entry();
    skip_ = 1;
    return true;
  }
  bool close() {
    if (stream_ == Stream::kNone) return open_.pop_back(), true;
    if (skip_ > 0) return --skip_, true;
    if (in_merge_) {
      using M = BpeLists::MergeEntry;
      const bool pair = parts_.size() == 2 && !merge_bad_;
      out_.lists.merges.push_back(pair ? M{M::kPair, std::move(parts_[0]), std::move(parts_[1])} : M{M::kBad, {}, {}});
      in_merge_ = false;
      return true;
    }
    (stream_ == Stream::kVocab ? out_.lists.has_vocab : out_.lists.has_merges) = true;
    stream_ = Stream::kNone;
    return true;
  }

  TokenizerJson& out_;
  const std::string& name_;
  std::vector<json*> open_;  // the tree's open containers, innermost last
  std::string key_;          // the open object's pending key
  json* model_ = nullptr;    // the root's "model" object
  Stream stream_ = Stream::kNone;
  int skip_ = 0;             // depth inside a container a stream skips
  std::string token_;        // the vocab entry's key
  bool in_merge_ = false, merge_bad_ = false;
  std::vector<std::string> parts_;  // the strings of the merge's array
};

}  // namespace

std::string bad_json_message(const std::string& name, const char* what, const nlohmann::json::exception& e) {
  if (const auto* p = dynamic_cast<const nlohmann::json::parse_error*>(&e))
    return fmt::format("{}: not a {} (invalid JSON at byte {})", name, what, p->byte);
  return fmt::format("{}: not a {} ({})", name, what, e.what());
}

TokenizerJson read_tokenizer_json(const std::string& text, const std::string& name) {
  TokenizerJson out;
  Reader reader(out, name);
  json::sax_parse(text, &reader);
  return out;
}

}  // namespace zero::data
