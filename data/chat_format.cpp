// The Qwen3 chat template over a message list, and hh-rlhf transcripts read as message lists.
#include "data/chat_format.h"

namespace zero::data {

namespace {
constexpr std::string_view kHuman = "\n\nHuman:";
constexpr std::string_view kAssistant = "\n\nAssistant:";

std::string_view strip(std::string_view s, std::string_view chars = " \t\r\n") {
  const size_t b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(chars) - b + 1);
}
std::string_view lstrip(std::string_view s, std::string_view chars) {
  const size_t b = s.find_first_not_of(chars);
  return b == std::string_view::npos ? std::string_view{} : s.substr(b);
}
std::string_view rstrip(std::string_view s, std::string_view chars) {
  const size_t e = s.find_last_not_of(chars);
  return e == std::string_view::npos ? std::string_view{} : s.substr(0, e + 1);
}

bool is_tool_response(std::string_view s) {
  return s.starts_with("<tool_response>") && s.ends_with("</tool_response>");
}

// The template's `ns.last_query_index`: the last user message that is not a tool response, else the last
// message.
size_t last_query_index(std::span<const ChatMessage> m) {
  for (size_t i = m.size(); i-- > 0;)
    if (m[i].role == ChatRole::User && !is_tool_response(m[i].content)) return i;
  return m.empty() ? 0 : m.size() - 1;
}

// `after_query`: the message comes after the last user query; `last`: it is the last message.
void render_assistant(const ChatMessage& msg, bool after_query, bool last, std::string& out) {
  std::string_view content = msg.content, reasoning;
  if (msg.reasoning) {
    reasoning = *msg.reasoning;
  } else if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
    // Python's split('</think>'): [-1] is after the last one, [0] before the first.
    const std::string_view before = rstrip(content.substr(0, close), "\n");
    const size_t open = before.rfind("<think>");
    reasoning = lstrip(open == std::string_view::npos ? before : before.substr(open + 7), "\n");
    content = lstrip(content.substr(content.rfind("</think>") + 8), "\n");
  }
  out += "<|im_start|>assistant\n";
  if (after_query && (last || !reasoning.empty())) {
    out += "<think>\n";
    out += strip(reasoning, "\n");
    out += "\n</think>\n\n";
    out += lstrip(content, "\n");
  } else {
    out += content;
  }
}
}  // namespace

std::optional<ChatRole> chat_role_named(std::string_view name) {
  if (name == "system") return ChatRole::System;
  if (name == "user") return ChatRole::User;
  if (name == "assistant") return ChatRole::Assistant;
  return std::nullopt;
}

std::string render_qwen3_chat(std::span<const ChatMessage> messages) {
  const size_t query = last_query_index(messages);
  size_t bytes = 0;
  for (const ChatMessage& m : messages) bytes += m.content.size() + 48;
  std::string out;
  out.reserve(bytes);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i + 1 == messages.size();
    if (m.role == ChatRole::Assistant) {
      render_assistant(m, i > query, last, out);
      if (!last) out += "<|im_end|>\n";  // the final one is the dataset's end token
      continue;
    }
    out += m.role == ChatRole::System ? "<|im_start|>system\n" : "<|im_start|>user\n";
    out += m.content;
    out += "<|im_end|>\n";
  }
  return out;
}

std::optional<std::vector<ChatMessage>> hh_transcript_messages(std::string_view t) {
  // Next marker at or after `from`, whichever comes first.
  auto next_marker = [&](size_t from, bool& user) {
    const size_t h = t.find(kHuman, from), a = t.find(kAssistant, from);
    user = h <= a;
    return std::min(h, a);
  };
  bool user = false;
  size_t at = next_marker(0, user);
  if (at == std::string_view::npos || !strip(t.substr(0, at)).empty()) return std::nullopt;
  std::vector<ChatMessage> turns;
  while (at != std::string_view::npos) {
    const size_t pos = at + (user ? kHuman.size() : kAssistant.size());
    bool next_user = false;
    const size_t nxt = next_marker(pos, next_user);
    turns.push_back({user ? ChatRole::User : ChatRole::Assistant,
                     std::string(strip(t.substr(pos, nxt == std::string_view::npos ? t.npos : nxt - pos))), {}});
    at = nxt;
    user = next_user;
  }
  return turns;
}

std::optional<std::string> hh_to_qwen_chat(std::string_view transcript) {
  const auto turns = hh_transcript_messages(transcript);
  if (!turns) return std::nullopt;
  return render_qwen3_chat(*turns);
}

}  // namespace zero::data
