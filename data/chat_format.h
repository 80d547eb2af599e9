// Turns an hh-rlhf transcript ("\n\nHuman: ..." / "\n\nAssistant: ..." turns) into Qwen3 chat text.
//
// Exactly what is produced (tokenizer_config.json's chat_template with no system prompt and no tools):
//   each Human turn:                 "<|im_start|>user\n" + content + "<|im_end|>\n"
//   each Assistant turn but the last: "<|im_start|>assistant\n" + content + "<|im_end|>\n"
//   the final Assistant turn:        "<|im_start|>assistant\n<think>\n\n</think>\n\n" + content
// where content is the turn text with surrounding whitespace stripped. The template's closing
// "<|im_end|>\n" after the final turn is left out: the dataset appends the end token (default
// <|im_end|>) as an id, so the sequence equals the template's tokens minus its final "\n".
// A transcript ending on a Human turn renders all turns as above and ends with that "<|im_end|>\n".
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace zero::data {

// Empty optional when `transcript` is not a transcript (no turn markers, or text before the first).
std::optional<std::string> hh_to_qwen_chat(std::string_view transcript);

}  // namespace zero::data
