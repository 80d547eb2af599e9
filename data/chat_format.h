// Conversations rendered in the Qwen3 chat layout: a list of messages (the shape most preference datasets
// use: [{"role": "user", "content": ...}, {"role": "assistant", ...}]), or an hh-rlhf transcript
// ("\n\nHuman: ..." / "\n\nAssistant: ..." turns) read as one.
//
// render_qwen3_chat is exactly data/assets/qwen3/tokenizer_config.json's chat_template rendered with no
// tools and add_generation_prompt false (tests/pmtrain/chat_template_crosscheck.py renders the template
// with jinja2 as transformers does and compares), except that the closing "<|im_end|>\n" of a final
// assistant message is left out: the dataset appends the end token (default <|im_end|>) as an id, so the
// sequence equals the template's tokens minus its final "\n". Per message:
//   system or user:  "<|im_start|>" + role + "\n" + content + "<|im_end|>\n"
//   assistant:       content = the text after the last "</think>" with leading "\n" removed, reasoning = the
//                    text between "<think>" and it with "\n" trimmed (or the message's reasoning_content);
//                    after the last user query and (the last message, or with reasoning):
//                      "<|im_start|>assistant\n<think>\n" + reasoning + "\n</think>\n\n" + content
//                    otherwise "<|im_start|>assistant\n" + content; then "<|im_end|>\n".
// The last user query is the last user message that is not a "<tool_response>...</tool_response>" wrapper.
// Tool roles and tool calls are not supported (the parser in hh_rlhf.cpp refuses them).
//
// An hh transcript's turns become user and assistant messages, each turn's text stripped of surrounding
// whitespace (the dataset writes "Human: text"), so a final Assistant turn renders as
// "<|im_start|>assistant\n<think>\n\n</think>\n\n" + text.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zero::data {

enum class ChatRole : uint8_t { System, User, Assistant };

struct ChatMessage {
  ChatRole role;
  std::string content;
  std::optional<std::string> reasoning;  // an assistant's reasoning_content, when the data gives one
};

// The role named `name` ("system", "user", "assistant"), or none.
std::optional<ChatRole> chat_role_named(std::string_view name);

std::string render_qwen3_chat(std::span<const ChatMessage> messages);

// The turns of an hh transcript; none when it is not one (no turn markers, or text before the first).
std::optional<std::vector<ChatMessage>> hh_transcript_messages(std::string_view transcript);

// hh_transcript_messages rendered; none when `transcript` is not a transcript.
std::optional<std::string> hh_to_qwen_chat(std::string_view transcript);

}  // namespace zero::data
