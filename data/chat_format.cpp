// hh-rlhf transcript parsing into turns and rendering in the Qwen3 chat layout.
#include "data/chat_format.h"

#include <vector>

namespace zero::data {

namespace {
constexpr std::string_view kHuman = "\n\nHuman:";
constexpr std::string_view kAssistant = "\n\nAssistant:";

std::string_view strip(std::string_view s) {
  const auto ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

struct Turn {
  bool user;
  std::string_view content;
};
}  // namespace

std::optional<std::string> hh_to_qwen_chat(std::string_view t) {
  std::vector<Turn> turns;
  size_t pos = 0;
  // Next marker at or after `from`, whichever comes first.
  auto next_marker = [&](size_t from, bool& user) {
    const size_t h = t.find(kHuman, from), a = t.find(kAssistant, from);
    user = h <= a;
    return std::min(h, a);
  };
  bool user = false;
  size_t at = next_marker(0, user);
  if (at == std::string_view::npos || !strip(t.substr(0, at)).empty()) return std::nullopt;
  while (at != std::string_view::npos) {
    pos = at + (user ? kHuman.size() : kAssistant.size());
    bool next_user = false;
    const size_t nxt = next_marker(pos, next_user);
    turns.push_back({user, strip(t.substr(pos, nxt == std::string_view::npos ? t.npos : nxt - pos))});
    at = nxt;
    user = next_user;
  }
  std::string out;
  out.reserve(t.size() + 64 * turns.size());
  for (size_t i = 0; i < turns.size(); ++i) {
    const bool last = i + 1 == turns.size();
    if (turns[i].user) {
      out += "<|im_start|>user\n";
      out += turns[i].content;
      out += "<|im_end|>\n";
    } else if (last) {
      out += "<|im_start|>assistant\n<think>\n\n</think>\n\n";
      out += turns[i].content;
    } else {
      out += "<|im_start|>assistant\n";
      out += turns[i].content;
      out += "<|im_end|>\n";
    }
  }
  return out;
}

}  // namespace zero::data
