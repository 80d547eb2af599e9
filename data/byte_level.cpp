// GPT-2's bytes_to_unicode table and the conversions between raw bytes and its alphabet.
#include "data/byte_level.h"

#include <vector>

namespace zero::data {

const std::array<char32_t, 256>& byte_to_codepoint() {
  static const std::array<char32_t, 256> table = [] {
    // Printable Latin-1 bytes keep their code point; the other 68 are moved to 256.. in byte order.
    std::array<char32_t, 256> t{};
    auto printable = [](int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable(b) ? char32_t(b) : next++;
    return t;
  }();
  return table;
}

namespace {

// code point -> byte, or -1; the alphabet lies within U+0000..U+0143.
const std::vector<int>& codepoint_to_byte() {
  static const std::vector<int> inv = [] {
    std::vector<int> v(512, -1);
    const auto& t = byte_to_codepoint();
    for (int b = 0; b < 256; ++b) v[t[b]] = b;
    return v;
  }();
  return inv;
}

void append_utf8(std::string& s, char32_t cp) {
  if (cp < 0x80) {
    s.push_back(char(cp));
  } else if (cp < 0x800) {
    s.push_back(char(0xC0 | (cp >> 6)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(char(0xE0 | (cp >> 12)));
    s.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

bool byte_level_decode(std::string_view token, std::string& out) {
  out.clear();
  const auto& inv = codepoint_to_byte();
  for (size_t i = 0; i < token.size();) {
    const auto c = static_cast<unsigned char>(token[i]);
    char32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < token.size()) {
      cp = (char32_t(c & 0x1F) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;  // every alphabet code point fits in two UTF-8 bytes
    }
    if (cp >= inv.size() || inv[cp] < 0) return false;
    out.push_back(char(inv[cp]));
  }
  return true;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string s;
  s.reserve(bytes.size() * 2);
  const auto& t = byte_to_codepoint();
  for (unsigned char b : bytes) append_utf8(s, t[b]);
  return s;
}

}  // namespace zero::data
