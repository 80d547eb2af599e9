// hh-rlhf line validation, bad-line accounting and the optional chat rendering.
#include "data/hh_rlhf.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/chat_format.h"
#include "data/line_reader.h"

namespace zero::data {

const char* bad_line_kind_name(BadLineKind k) {
  switch (k) {
    case BadLineKind::NotJson: return "not_json";
    case BadLineKind::MissingField: return "missing_field";
    case BadLineKind::NotString: return "not_string";
    case BadLineKind::Empty: return "empty";
    case BadLineKind::NotTranscript: return "not_transcript";
  }
  return "?";
}

int64_t ReadStats::bad_total() const {
  int64_t n = 0;
  for (int64_t c : bad) n += c;
  return n;
}

std::string ReadStats::report() const {
  std::string s = fmt::format("data: {} files, {} lines, {} pairs, {} bad lines skipped", files, lines, pairs,
                              bad_total());
  for (size_t k = 0; k < kNumBadLineKinds; ++k)
    if (bad[k]) s += fmt::format("\n  {}: {} (first: {})", bad_line_kind_name(BadLineKind(k)), bad[k], first_bad[k]);
  return s;
}

nlohmann::json ReadStats::to_json() const {
  nlohmann::json j = {{"files", files}, {"lines", lines}, {"pairs", pairs}};
  for (size_t k = 0; k < kNumBadLineKinds; ++k)
    j["bad"][bad_line_kind_name(BadLineKind(k))] = {{"count", bad[k]}, {"first", first_bad[k]}};
  return j;
}

ReadStats ReadStats::from_json(const nlohmann::json& j) {
  ReadStats s;
  s.files = j.at("files").get<int64_t>();
  s.lines = j.at("lines").get<int64_t>();
  s.pairs = j.at("pairs").get<int64_t>();
  for (size_t k = 0; k < kNumBadLineKinds; ++k) {
    const auto& b = j.at("bad").at(bad_line_kind_name(BadLineKind(k)));
    s.bad[k] = b.at("count").get<int64_t>();
    s.first_bad[k] = b.at("first").get<std::string>();
  }
  return s;
}

std::optional<BadLine> parse_hh_line(const std::string& line, const HhReaderConfig& cfg, std::string& chosen,
                                     std::string& rejected) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return BadLine{BadLineKind::NotJson, "not a JSON object"};
  std::string* out[2] = {&chosen, &rejected};
  const std::string* field[2] = {&cfg.chosen_field, &cfg.rejected_field};
  for (int f = 0; f < 2; ++f) {
    const auto it = j.find(*field[f]);
    if (it == j.end()) return BadLine{BadLineKind::MissingField, fmt::format("no field '{}'", *field[f])};
    if (!it->is_string())
      return BadLine{BadLineKind::NotString, fmt::format("field '{}' is not a string", *field[f])};
    std::string& text = it->get_ref<std::string&>();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
      return BadLine{BadLineKind::Empty, fmt::format("field '{}' is empty", *field[f])};
    *out[f] = std::move(text);  // the parsed object is ours: no copy
  }
  if (cfg.mode == TextMode::Chat) {
    auto c = hh_to_qwen_chat(chosen);
    auto r = hh_to_qwen_chat(rejected);
    if (!c || !r)
      return BadLine{BadLineKind::NotTranscript,
                     fmt::format("field '{}' is not a \"\\n\\nHuman: ...\\n\\nAssistant: ...\" transcript (chat mode)",
                                 c ? *field[1] : *field[0])};
    chosen = std::move(*c);
    rejected = std::move(*r);
  }
  return std::nullopt;
}

void read_hh_pairs(const std::vector<std::string>& files, const HhReaderConfig& cfg, ReadStats& stats,
                   const std::function<void(std::string_view, std::string_view)>& on_pair) {
  std::string line, chosen, rejected;
  for (const auto& path : files) {
    LineReader reader(path);
    ++stats.files;
    while (reader.next(line)) {
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are not records
      ++stats.lines;
      if (const auto bad = parse_hh_line(line, cfg, chosen, rejected)) {
        const std::string msg = fmt::format("{}:{}: {}", path, reader.line_number(), bad->why);
        if (cfg.bad_lines == BadLinePolicy::Fail)
          throw InputError(msg + " (set the bad-line policy to skip to count and skip such lines)");
        if (stats.bad[size_t(bad->kind)]++ == 0) stats.first_bad[size_t(bad->kind)] = msg;
        continue;
      }
      on_pair(chosen, rejected);
      ++stats.pairs;
    }
  }
}

}  // namespace zero::data
