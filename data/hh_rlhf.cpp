// Preference-pair line validation (strings or message lists, an optional prompt field), bad-line
// accounting and the chat rendering.
#include "data/hh_rlhf.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <nlohmann/json.hpp>
#include <utf8proc.h>

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
    case BadLineKind::BadMessages: return "bad_messages";
    case BadLineKind::BadMargin: return "bad_margin";
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

namespace {
using nlohmann::json;

// Input text quoted in a bad-line reason, which goes into logs and into score's JSON rows (nlohmann
// refuses to write invalid UTF-8): valid UTF-8 characters are kept, control characters and bytes that
// are not UTF-8 become \xNN, and at most max_chars characters are kept ("..." marks the cut).
std::string excerpt(std::string_view text, size_t max_chars) {
  std::string out;
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++chars) {
    if (chars == max_chars) return out + "...";
    utf8proc_int32_t cp = -1;
    const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                                                utf8proc_ssize_t(text.size() - i), &cp);
    if (n <= 0 || cp < 0x20 || cp == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    out.append(text, i, size_t(n));
    i += size_t(n);
  }
  return out;
}

// `field`'s value in `j`: a string or a list, else why not.
std::optional<BadLine> find_field(json& j, const std::string& field, json*& value) {
  const auto it = j.find(field);
  if (it == j.end()) return BadLine{BadLineKind::MissingField, fmt::format("no field '{}'", field)};
  if (!it->is_string() && !it->is_array())
    return BadLine{BadLineKind::NotString, fmt::format("field '{}' is neither a string nor a list of messages", field)};
  value = &*it;
  return std::nullopt;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// Appends a list value's messages to `out`.
std::optional<BadLine> append_messages(json& list, const std::string& field, std::vector<ChatMessage>& out) {
  for (size_t k = 0; k < list.size(); ++k) {
    json& m = list[k];
    auto bad = [&](const std::string& why) {
      return BadLine{BadLineKind::BadMessages, fmt::format("field '{}', message {}: {}", field, k, why)};
    };
    if (!m.is_object()) return bad("not a {\"role\", \"content\"} object");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return bad("no string 'role'");
    const auto r = chat_role_named(role->get_ref<const std::string&>());
    if (!r)
      return bad(fmt::format("role '{}' is not system, user or assistant", excerpt(role->get_ref<const std::string&>(), 40)));
    const auto content = m.find("content");
    if (content == m.end() || !content->is_string()) return bad("no string 'content'");
    if (const auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null() && !calls->empty())
      return bad("tool calls are not supported");
    std::optional<std::string> reasoning;
    if (const auto rc = m.find("reasoning_content"); rc != m.end() && !rc->is_null()) {
      if (!rc->is_string()) return bad("'reasoning_content' is not a string");
      reasoning = std::move(rc->get_ref<std::string&>());
    }
    out.push_back({*r, std::move(content->get_ref<std::string&>()), std::move(reasoning)});
  }
  return std::nullopt;
}

// The margin field's value, a finite number (as a float), else why not.
std::optional<BadLine> read_margin(const json& j, const std::string& field, float& margin) {
  const auto it = j.find(field);
  if (it == j.end()) return BadLine{BadLineKind::MissingField, fmt::format("no field '{}'", field)};
  margin = it->is_number() ? float(it->get<double>()) : NAN;
  if (!std::isfinite(margin))
    return BadLine{BadLineKind::BadMargin, fmt::format("field '{}' is not a finite number (a float's range): {}", field,
                                                       excerpt(it->dump(), 40))};
  return std::nullopt;
}

// Why a line is not a JSON object, for its bad-line message: nlohmann's own reason for malformed JSON
// (parsed again, with exceptions, only for such a line) without its exception tag, or the kind of JSON it
// is. The reason quotes the line: an excerpt of it.
std::string not_an_object_reason(const std::string& line, const json& parsed) {
  if (!parsed.is_discarded()) return fmt::format("not a JSON object: the line is a JSON {}", parsed.type_name());
  std::string why = "malformed";
  try {
    [[maybe_unused]] const json again = json::parse(line);
  } catch (const json::exception& e) {
    why = e.what();
    if (why.starts_with("[json.exception.") && why.find("] ") != std::string::npos) why.erase(0, why.find("] ") + 2);
  }
  return "not a JSON object: " + excerpt(why, 160);
}
}  // namespace

std::optional<BadLine> parse_hh_line(const std::string& line, const HhReaderConfig& cfg, PairText& pair) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return BadLine{BadLineKind::NotJson, not_an_object_reason(line, j)};
  pair.margin = 0.0f;
  if (!cfg.margin_field.empty())
    if (auto bad = read_margin(j, cfg.margin_field, pair.margin)) return bad;
  std::string& chosen = pair.chosen;
  std::string& rejected = pair.rejected;
  std::string* out[2] = {&chosen, &rejected};
  const std::string* field[2] = {&cfg.chosen_field, &cfg.rejected_field};
  json* answer[2] = {nullptr, nullptr};
  json* prompt = nullptr;
  if (!cfg.prompt_field.empty())
    if (auto bad = find_field(j, cfg.prompt_field, prompt)) return bad;
  bool lists = prompt && prompt->is_array();
  for (int f = 0; f < 2; ++f) {
    if (auto bad = find_field(j, *field[f], answer[f])) return bad;
    if (answer[f]->is_string() ? blank(answer[f]->get_ref<const std::string&>()) : answer[f]->empty())
      return BadLine{BadLineKind::Empty, fmt::format("field '{}' is empty", *field[f])};
    lists |= answer[f]->is_array();
  }

  if (lists) {  // a conversation: the prompt's messages, then the answer's, in the chat layout
    std::vector<ChatMessage> head;
    if (prompt && prompt->is_array()) {
      if (auto bad = append_messages(*prompt, cfg.prompt_field, head)) return bad;
    } else if (prompt && !blank(prompt->get_ref<const std::string&>())) {
      head.push_back({ChatRole::User, prompt->get_ref<const std::string&>(), {}});
    }
    for (int f = 0; f < 2; ++f) {
      std::vector<ChatMessage> messages = head;
      if (answer[f]->is_array()) {
        if (auto bad = append_messages(*answer[f], *field[f], messages)) return bad;
        if (std::none_of(messages.begin() + ptrdiff_t(head.size()), messages.end(),
                         [](const ChatMessage& m) { return m.role == ChatRole::Assistant; }))
          return BadLine{BadLineKind::BadMessages, fmt::format("field '{}' has no assistant message", *field[f])};
      } else {
        messages.push_back({ChatRole::Assistant, std::move(answer[f]->get_ref<std::string&>()), {}});
      }
      *out[f] = render_qwen3_chat(messages);
    }
    return std::nullopt;
  }

  for (int f = 0; f < 2; ++f) {  // strings: prompt + answer (the parsed object is ours: no copy without a prompt)
    std::string& text = answer[f]->get_ref<std::string&>();
    *out[f] = prompt ? prompt->get_ref<const std::string&>() + text : std::move(text);
  }
  if (cfg.mode == TextMode::Chat) {
    auto c = hh_to_qwen_chat(chosen);
    auto r = hh_to_qwen_chat(rejected);
    if (!c || !r) {
      // A plain prompt (no transcript of its own): the user's message, each answer the assistant's.
      const std::string* p = prompt ? &prompt->get_ref<const std::string&>() : nullptr;
      if (p && !blank(*p) && !hh_transcript_messages(*p)) {
        for (int f = 0; f < 2; ++f) {
          const ChatMessage conv[2] = {{ChatRole::User, *p, {}}, {ChatRole::Assistant, out[f]->substr(p->size()), {}}};
          *out[f] = render_qwen3_chat(conv);
        }
        return std::nullopt;
      }
      return BadLine{BadLineKind::NotTranscript,
                     fmt::format("{}field '{}' is not a \"\\n\\nHuman: ...\\n\\nAssistant: ...\" transcript (chat mode)",
                                 prompt ? fmt::format("field '{}' + ", cfg.prompt_field) : "", c ? *field[1] : *field[0])};
    }
    chosen = std::move(*c);
    rejected = std::move(*r);
  }
  return std::nullopt;
}

void for_each_hh_line(const std::string& path, const HhReaderConfig& cfg, const LineVisitor& on_line,
                      const std::function<void(int64_t line, double fraction_read)>& after_line) {
  LineReader reader(path);
  std::string line;
  PairText pair;
  while (reader.next(line)) {
    const int64_t n = reader.line_number();
    if (line.find_first_not_of(" \t") == std::string::npos) {
      on_line(n, true, nullptr, pair);
    } else {
      const std::optional<BadLine> bad = parse_hh_line(line, cfg, pair);
      on_line(n, false, bad ? &*bad : nullptr, pair);
    }
    if (after_line) after_line(n, reader.fraction_read());
  }
}

void read_hh_pairs(const std::vector<std::string>& files, const HhReaderConfig& cfg, ReadStats& stats,
                   const std::function<void(PairText&)>& on_pair) {
  for (const auto& path : files) {
    ++stats.files;
    for_each_hh_line(path, cfg, [&](int64_t n, bool blank, const BadLine* bad, PairText& pair) {
      if (blank) return;  // blank lines are not records
      ++stats.lines;
      if (bad) {
        const std::string msg = fmt::format("{}:{}: {}", path, n, bad->why);
        if (cfg.bad_lines == BadLinePolicy::Fail)
          throw InputError(msg + " (set the bad-line policy to skip to count and skip such lines)");
        if (stats.bad[size_t(bad->kind)]++ == 0) stats.first_bad[size_t(bad->kind)] = msg;
        return;
      }
      on_pair(pair);
      ++stats.pairs;
    });
  }
}

}  // namespace zero::data
