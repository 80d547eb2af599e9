// tokenizer.json loading and validation, added-token splitting, NFC, and the cached encode path.
#include "data/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "core/check.h"
#include "data/tokenizer_json.h"

namespace zero::data {

namespace {

constexpr size_t kMaxCachedWords = 1 << 20;  // bounds memory on huge corpora; hh-rlhf fits easily
// eos/pad token names when no tokenizer_config.json says otherwise (Qwen's).
constexpr const char* kDefaultEos = "<|im_end|>";
constexpr const char* kDefaultPad = "<|endoftext|>";
constexpr size_t kMaxCachedIds = size_t(1) << 26;  // keeps pool offsets far inside uint32

std::string read_file(const std::string& path, const char* what) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  ZERO_REQUIRE(!std::filesystem::is_directory(st), InputError, "{}: a directory, not a {} file", path, what);
  std::ifstream f(path, std::ios::binary);
  ZERO_REQUIRE(f.good(), InputError, "{}: cannot open {} (check the path)", path, what);
  if (!std::filesystem::is_regular_file(st)) {  // a pipe: streamed
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // Sized from the file and read once: a stringstream grows by doubling and copies, three times the 11 MB of
  // Qwen3's tokenizer.json touched (each fresh page a fault) for every process that loads it.
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  f.seekg(0);
  ZERO_REQUIRE(size >= 0, InputError, "{}: cannot read {} (its size is unknown)", path, what);
  std::string text(size_t(size), '\0');
  f.read(text.data(), size);
  ZERO_REQUIRE(f.gcount() == size, InputError, "{}: {} could not be read whole", path, what);
  return text;
}

nlohmann::json read_json_file(const std::string& path, const char* what) {
  try {
    return nlohmann::json::parse(read_file(path, what));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(bad_json_message(path, what, e));
  }
}

// Reads the Split regex out of the pre_tokenizer and checks the rest is the Qwen layout
// (Split Isolated, then ByteLevel without its own regex).
std::string split_regex(const nlohmann::json& pre, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return ConfigError(fmt::format("{}: unsupported pre_tokenizer ({}); expected Sequence[Split(Regex, "
                                   "Isolated), ByteLevel(use_regex=false)] as in Qwen2/Qwen3",
                                   where, why));
  };
  if (!pre.is_object() || pre.value("type", "") != "Sequence" || !pre.contains("pretokenizers"))
    throw bad("not a Sequence");
  const auto& seq = pre["pretokenizers"];
  if (!seq.is_array() || seq.size() != 2) throw bad("not two steps");
  const auto& split = seq[0];
  const auto& bl = seq[1];
  if (split.value("type", "") != "Split" || !split.contains("pattern") || !split["pattern"].is_object() ||
      !split["pattern"].contains("Regex") || !split["pattern"]["Regex"].is_string())
    throw bad("first step is not a Split on a Regex");
  if (split.value("behavior", "") != "Isolated" || split.value("invert", false)) throw bad("Split is not Isolated");
  if (bl.value("type", "") != "ByteLevel" || bl.value("use_regex", true) || bl.value("add_prefix_space", false))
    throw bad("second step is not ByteLevel(use_regex=false, add_prefix_space=false)");
  return split["pattern"]["Regex"].get<std::string>();
}

std::string token_name(const nlohmann::json& cfg, const char* key, const char* fallback) {
  if (!cfg.contains(key)) return fallback;
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";  // null: the tokenizer has none
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::string& path) {
  const TokenizerJson j = read_tokenizer_json(read_file(path, "tokenizer.json"), path);
  std::string eos = kDefaultEos, pad = kDefaultPad;
  const auto cfg_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  if (std::filesystem::exists(cfg_path)) {
    const nlohmann::json cfg = read_json_file(cfg_path, "tokenizer_config.json");
    eos = token_name(cfg, "eos_token", eos.c_str());
    pad = token_name(cfg, "pad_token", pad.c_str());
  }
  return from_json(j, path, eos, pad);
}

Tokenizer Tokenizer::from_json_text(const std::string& text, const std::string& name) {
  return from_json(read_tokenizer_json(text, name), name, kDefaultEos, kDefaultPad);
}

Tokenizer Tokenizer::from_json(const TokenizerJson& file, const std::string& path, const std::string& eos,
                               const std::string& pad) {
  const nlohmann::json& j = file.tree;
  ZERO_REQUIRE(j.is_object() && j.contains("model") && j["model"].is_object(), InputError,
               "{}: not a Hugging Face tokenizer.json (no 'model' object)", path);
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const auto& n = j["normalizer"];
    ZERO_REQUIRE(n.is_object() && n.value("type", "") == "NFC", ConfigError,
                 "{}: unsupported normalizer {} (only NFC, as in Qwen2/Qwen3)", path, n.dump());
  }
  ZERO_REQUIRE(j.contains("pre_tokenizer"), InputError, "{}: not a Hugging Face tokenizer.json (no 'pre_tokenizer')",
               path);
  Pretokenizer pre(split_regex(j["pre_tokenizer"], path), path);
  Tokenizer t(path, BpeModel(j["model"], file.lists, path), std::move(pre));

  t.id_to_text_.reserve(t.bpe_.vocab_size() + 64);
  for (int32_t i = 0; i < t.bpe_.vocab_size(); ++i) t.id_to_text_.push_back(t.bpe_.token_bytes(i));
  t.id_special_.assign(t.id_to_text_.size(), 0);

  if (j.contains("added_tokens")) {
    ZERO_REQUIRE(j["added_tokens"].is_array(), InputError, "{}: 'added_tokens' is not an array", path);
    for (const auto& a : j["added_tokens"]) {
      ZERO_REQUIRE(a.is_object() && a.contains("id") && a["id"].is_number_integer() && a.contains("content") &&
                       a["content"].is_string(),
                   InputError, "{}: an added_tokens entry lacks an integer 'id' or a string 'content'", path);
      const auto id = a["id"].get<int64_t>();
      const auto text = a["content"].get<std::string>();
      ZERO_REQUIRE(id >= 0 && id < (1 << 24), InputError, "{}: added token '{}' has id {}", path, text, id);
      // Qwen's added tokens are matched verbatim; the flags that change matching are not implemented.
      ZERO_REQUIRE(!a.value("lstrip", false) && !a.value("rstrip", false) && !a.value("single_word", false) &&
                       !a.value("normalized", false),
                   ConfigError, "{}: added token '{}' uses lstrip/rstrip/single_word/normalized (unsupported)", path,
                   text);
      ZERO_REQUIRE(!text.empty(), InputError, "{}: added token {} is empty", path, id);
      // An id the vocab (or an earlier added token) already gives to other bytes would decode as those.
      const bool taken = size_t(id) < t.id_to_text_.size() &&
                         (id < t.bpe_.vocab_size() || !t.id_to_text_[size_t(id)].empty());
      ZERO_REQUIRE(!taken || t.id_to_text_[size_t(id)] == text, InputError,
                   "{}: added token '{}' has id {}, which already belongs to the token '{}'", path, text, id,
                   t.id_to_text_[size_t(id)]);
      if (size_t(id) >= t.id_to_text_.size()) {
        t.id_to_text_.resize(id + 1);
        t.id_special_.resize(id + 1, 0);
      }
      t.id_to_text_[id] = text;
      t.id_special_[id] = a.value("special", false) ? 1 : 0;
      t.added_.push_back({text, int32_t(id), a.value("special", false)});
      t.added_by_text_[text] = int32_t(id);
      t.added_first_byte_[static_cast<unsigned char>(text[0])] = true;
    }
  }
  std::stable_sort(t.added_.begin(), t.added_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.text.size() > b.text.size(); });

  t.eos_id_ = eos.empty() ? -1 : t.token_id(eos);
  t.pad_id_ = pad.empty() ? -1 : t.token_id(pad);
  return t;
}

int32_t Tokenizer::token_id(std::string_view token) const {
  if (const auto it = added_by_text_.find(token); it != added_by_text_.end()) return it->second;
  return bpe_.id_of(token);
}

void Tokenizer::clear_cache() {
  cache_.clear();
  cache_pool_.clear();
}

bool Tokenizer::find_added(std::string_view text, size_t from, size_t& at, const AddedToken*& tok) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (!added_first_byte_[static_cast<unsigned char>(text[i])]) continue;
    for (const auto& a : added_)
      if (text.compare(i, a.text.size(), a.text) == 0) {
        at = i;
        tok = &a;
        return true;
      }
  }
  return false;
}

void Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& out) {
  size_t pos = 0, at = 0;
  const AddedToken* tok = nullptr;
  while (pos < text.size()) {
    if (!find_added(text, pos, at, tok)) {
      encode_plain(text.substr(pos), out);
      return;
    }
    if (at > pos) encode_plain(text.substr(pos, at - pos), out);
    out.push_back(tok->id);
    pos = at + tok->text.size();
  }
}

// NFC, pre-tokenize, then BPE per piece. ASCII is already NFC, so it skips utf8proc.
void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) {
  std::string_view normalized = text;
  if (!is_ascii(text)) {
    utf8proc_uint8_t* dst = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), utf8proc_ssize_t(text.size()), &dst,
                     utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) {
      free(dst);
      throw InputError(fmt::format("text is not valid UTF-8 ({})", utf8proc_errmsg(n)));
    }
    nfc_.assign(reinterpret_cast<const char*>(dst), size_t(n));
    free(dst);
    normalized = nfc_;
  }
  pieces_.clear();
  pre_.split(normalized, pieces_);
  for (std::string_view p : pieces_) encode_piece(p, out);
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) {
  ++cache_lookups_;
  if (const auto it = cache_.find(piece); it != cache_.end()) {
    ++cache_hits_;
    out.insert(out.end(), cache_pool_.begin() + it->second.offset,
               cache_pool_.begin() + it->second.offset + it->second.len);
    return;
  }
  const size_t before = out.size();
  bpe_.encode_word(piece, out);
  if (cache_.size() >= kMaxCachedWords || cache_pool_.size() >= kMaxCachedIds) clear_cache();
  const Span s{uint32_t(cache_pool_.size()), uint32_t(out.size() - before)};
  cache_pool_.insert(cache_pool_.end(), out.begin() + before, out.end());
  cache_.emplace(std::string(piece), s);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string s;
  for (int32_t id : ids) {
    ZERO_REQUIRE(id >= 0 && size_t(id) < id_to_text_.size(), InputError, "decode: id {} is outside 0..{}", id,
                 id_to_text_.size() - 1);
    if (skip_special && id_special_[id]) continue;
    s += id_to_text_[id];
  }
  return s;
}

}  // namespace zero::data
