// Regex pre-tokenizer (tokenizers' Split with behavior "Isolated") through PCRE2 with UTF, UCP and JIT:
// every match is a piece and so is every unmatched gap, in order. Not thread-safe (owns match data).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zero::data {

class Pretokenizer {
 public:
  // Compiles `pattern` (the tokenizer.json Split regex); `where` names the file in errors.
  Pretokenizer(const std::string& pattern, const std::string& where);
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  // Splits valid UTF-8 `text` into pieces (views into text), appended to `out`.
  void split(std::string_view text, std::vector<std::string_view>& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zero::data
