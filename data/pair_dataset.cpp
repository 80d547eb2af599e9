// Building a PairDataset: read pairs, tokenize, append the end token, enforce max_len.
#include "data/pair_dataset.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/line_reader.h"
#include "data/tokenizer.h"

namespace zero::data {

namespace {
const char* too_long_name(TooLongPolicy p) {
  switch (p) {
    case TooLongPolicy::TruncateKeepEnd: return "truncate_keep_end";
    case TooLongPolicy::TruncateKeepStart: return "truncate_keep_start";
    case TooLongPolicy::Drop: return "drop";
  }
  return "?";
}
}  // namespace

nlohmann::json DataConfig::to_json() const {
  // format 3: the margin field, the margins and the bad_margin count (a format-1 or 2 cache is rebuilt).
  return {{"format", 3},
          {"prompt_field", reader.prompt_field},
          {"margin_field", reader.margin_field},
          {"chosen_field", reader.chosen_field},
          {"rejected_field", reader.rejected_field},
          {"mode", reader.mode == TextMode::Chat ? "chat" : "raw"},
          {"bad_lines", reader.bad_lines == BadLinePolicy::Fail ? "fail" : "skip"},
          {"end_token", end_token},
          {"max_len", max_len},
          {"too_long", too_long_name(too_long)}};
}

std::string DataStats::report() const {
  return read.report() + fmt::format("\ndata: {} pairs truncated, {} pairs dropped as longer than max_len",
                                     pairs_truncated, pairs_dropped_too_long);
}

nlohmann::json DataStats::to_json() const {
  return {{"read", read.to_json()}, {"pairs_truncated", pairs_truncated},
          {"pairs_dropped_too_long", pairs_dropped_too_long}};
}

DataStats DataStats::from_json(const nlohmann::json& j) {
  DataStats s;
  s.read = ReadStats::from_json(j.at("read"));
  s.pairs_truncated = j.at("pairs_truncated").get<int64_t>();
  s.pairs_dropped_too_long = j.at("pairs_dropped_too_long").get<int64_t>();
  return s;
}

int64_t PairDataset::common_prefix(int64_t p) const {
  const auto c = seq(2 * p), r = seq(2 * p + 1);
  const size_t most = std::min(c.size(), r.size()) - 1;
  return std::mismatch(c.begin(), c.begin() + most, r.begin()).first - c.begin();
}

int32_t resolve_end_id(const DataConfig& config, const Tokenizer& tokenizer) {
  const int32_t id = tokenizer.token_id(config.end_token);
  ZERO_REQUIRE(id >= 0, ConfigError, "data.end_token '{}' is not a token of {}", config.end_token, tokenizer.path());
  ZERO_REQUIRE(id != tokenizer.pad_id(), ConfigError,
               "data.end_token '{}' is the pad token (id {}): the reward is read at the end token, so it must "
               "differ from padding (use \"<|im_end|>\")",
               config.end_token, id);
  return id;
}

void PairDataset::keep_first(int64_t pairs) {
  if (pairs >= num_pairs()) return;
  offsets.resize(size_t(2 * pairs + 1));
  tokens.resize(size_t(offsets.back()));
  if (!margins.empty()) margins.resize(size_t(pairs));
}

void PairDataset::drop_first(int64_t pairs) {
  pairs = std::min(pairs, num_pairs());
  if (pairs <= 0) return;
  const int64_t first_token = offsets[size_t(2 * pairs)];
  tokens.erase(tokens.begin(), tokens.begin() + first_token);
  offsets.erase(offsets.begin(), offsets.begin() + 2 * pairs);
  for (int64_t& o : offsets) o -= first_token;
  if (!margins.empty()) margins.erase(margins.begin(), margins.begin() + pairs);
}

void PairDataset::append(const PairDataset& other) {
  if (num_pairs() == 0 && tokens.empty() && offsets.empty()) {
    *this = other;
    return;
  }
  ZERO_REQUIRE(end_id == other.end_id && pad_id == other.pad_id && margins.empty() == other.margins.empty(),
               InternalError, "appending a dataset tokenized otherwise");
  const int64_t base = offsets.back();
  tokens.insert(tokens.end(), other.tokens.begin(), other.tokens.end());
  for (size_t s = 1; s < other.offsets.size(); ++s) offsets.push_back(base + other.offsets[s]);
  margins.insert(margins.end(), other.margins.begin(), other.margins.end());
  stats.read.files += other.stats.read.files;
  stats.read.lines += other.stats.read.lines;
  stats.read.pairs += other.stats.read.pairs;
  for (size_t k = 0; k < stats.read.bad.size(); ++k) {
    if (stats.read.bad[k] == 0) stats.read.first_bad[k] = other.stats.read.first_bad[k];
    stats.read.bad[k] += other.stats.read.bad[k];
  }
  stats.pairs_truncated += other.stats.pairs_truncated;
  stats.pairs_dropped_too_long += other.stats.pairs_dropped_too_long;
}

PairEncoder::PairEncoder(const DataConfig& config, Tokenizer& tokenizer, PairDataset& out)
    : config_(config), tokenizer_(tokenizer), out_(out) {
  ZERO_REQUIRE(config.max_len >= 2, ConfigError, "data.max_len must be at least 2, got {}", config.max_len);
  out_.end_id = resolve_end_id(config, tokenizer);
  out_.pad_id = tokenizer.pad_id();
  if (out_.offsets.empty()) out_.offsets.push_back(0);
}

bool PairEncoder::add(const PairText& pair) {
  const std::string_view text[2] = {pair.chosen, pair.rejected};
  bool truncated = false, too_long = false;
  for (int k = 0; k < 2; ++k) {
    std::vector<int32_t>& ids = ids_[k];
    ids.clear();
    tokenizer_.encode_into(text[k], ids);
    ids.push_back(out_.end_id);
    if (int64_t(ids.size()) <= config_.max_len) continue;
    too_long = true;
    if (config_.too_long == TooLongPolicy::TruncateKeepEnd) {
      ids.erase(ids.begin(), ids.end() - config_.max_len);
      truncated = true;
    } else if (config_.too_long == TooLongPolicy::TruncateKeepStart) {
      ids.resize(config_.max_len);
      ids.back() = out_.end_id;
      truncated = true;
    }
  }
  if (too_long && config_.too_long == TooLongPolicy::Drop) {
    ++out_.stats.pairs_dropped_too_long;
    return false;
  }
  out_.stats.pairs_truncated += truncated;
  for (int k = 0; k < 2; ++k) {
    out_.tokens.insert(out_.tokens.end(), ids_[k].begin(), ids_[k].end());
    out_.offsets.push_back(int64_t(out_.tokens.size()));
  }
  if (!config_.reader.margin_field.empty()) out_.margins.push_back(pair.margin);
  return true;
}

PairDataset build_pair_dataset(const DataConfig& config, Tokenizer& tokenizer) {
  PairDataset ds;
  PairEncoder encoder(config, tokenizer, ds);
  read_hh_pairs(expand_inputs(config.files), config.reader, ds.stats.read,
                [&](const PairText& pair) { encoder.add(pair); });
  return ds;
}

}  // namespace zero::data
