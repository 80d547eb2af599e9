// Preference pair reader: JSONL(.gz) lines -> (chosen text, rejected text), in the shapes preference data
// comes in:
//   hh-rlhf:             {"chosen": "\n\nHuman: ...\n\nAssistant: ...", "rejected": "..."}
//   a prompt field:      {"prompt": "...", "chosen": "...", "rejected": "..."}  (prompt_field = "prompt")
//   message lists:       {"chosen": [{"role": "user", "content": "..."}, {"role": "assistant", ...}], ...}
//   both:                {"prompt": [{"role": "user", ...}], "chosen": [{"role": "assistant", ...}], ...}
// Strings only: the text is prompt + answer, as it is (raw) or read as an hh transcript and rendered in the
// Qwen3 chat layout (chat); in chat mode a prompt that is plain text (no transcript of its own) is the
// user's message and each answer the assistant's. Where any of the fields is a list of messages, the conversation is the prompt's
// messages (a string: one user message) then the answer's (a string: one assistant message), always
// rendered in the chat layout (data/chat_format.h); roles system, user and assistant, each message
// {"role", "content"} and optionally "reasoning_content". A margin field (margin_field, TRL's "margin"
// column) gives each pair a number the loss asks the reward gap to exceed. Bad lines are counted by kind with the first
// file:line of each, then skipped or turned into an InputError, as configured.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zero::data {

enum class TextMode : uint8_t { Raw, Chat };
enum class BadLinePolicy : uint8_t { Skip, Fail };

struct HhReaderConfig {
  std::string prompt_field;  // "" = none: the answers carry their prompt
  std::string chosen_field = "chosen";
  std::string rejected_field = "rejected";
  std::string margin_field;  // "" = none: every margin 0
  TextMode mode = TextMode::Raw;
  BadLinePolicy bad_lines = BadLinePolicy::Skip;
};

// NotString: neither a string nor a list; BadMessages: a list that is not messages this reader renders;
// BadMargin: a margin that is not a finite number.
enum class BadLineKind : uint8_t { NotJson, MissingField, NotString, Empty, NotTranscript, BadMessages, BadMargin };
inline constexpr size_t kNumBadLineKinds = 7;
const char* bad_line_kind_name(BadLineKind k);

struct ReadStats {
  int64_t files = 0;
  int64_t lines = 0;  // non-blank lines seen
  int64_t pairs = 0;  // pairs handed on
  std::array<int64_t, kNumBadLineKinds> bad{};
  std::array<std::string, kNumBadLineKinds> first_bad;  // "file:line: why" of the first of each kind

  int64_t bad_total() const;
  std::string report() const;  // one line per non-zero kind, for the run log
  nlohmann::json to_json() const;
  static ReadStats from_json(const nlohmann::json& j);
};

struct BadLine {
  BadLineKind kind;
  std::string why;  // e.g. "no field 'chosen'"
};

// One pair as the model reads it.
struct PairText {
  std::string chosen, rejected;  // the texts (chat-rendered in chat mode), before the end token
  float margin = 0.0f;           // the margin field's value; 0 without a margin field
};

// One non-blank line: fills `out` and returns nullopt, or says why the line is bad. The reader below and
// `pmtrain score` / `pmtrain render` (which report every line) share it.
std::optional<BadLine> parse_hh_line(const std::string& line, const HhReaderConfig& cfg, PairText& out);

// Every line of one file, in order (1-based numbers): a pair (bad null, the pair in `pair`), a blank line
// (blank true; not a record, never counted) or a bad line (`bad` says why). The policy is the caller's:
// read_hh_pairs below, and `pmtrain score` / `pmtrain render`, which report every line.
using LineVisitor = std::function<void(int64_t line, bool blank, const BadLine* bad, PairText& pair)>;
// after_line(line, fraction): once each line is handled, with LineReader::fraction_read (progress reports).
void for_each_hh_line(const std::string& path, const HhReaderConfig& cfg, const LineVisitor& on_line,
                      const std::function<void(int64_t line, double fraction_read)>& after_line = {});

// Calls on_pair for every good line of every file, in file then line order (the pair may be moved from).
// `files` are paths (see expand_inputs for globs).
void read_hh_pairs(const std::vector<std::string>& files, const HhReaderConfig& cfg, ReadStats& stats,
                   const std::function<void(PairText&)>& on_pair);

}  // namespace zero::data
