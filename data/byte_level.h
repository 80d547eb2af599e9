// GPT-2 byte-level alphabet: each of the 256 bytes <-> one printable Unicode code point.
// byte-level BPE vocabularies spell tokens in this alphabet; we convert them back to raw bytes once at
// load time so the encoder works on bytes and never maps text through the alphabet per call.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace zero::data {

// The code point GPT-2 assigns to byte b (printable bytes map to themselves).
const std::array<char32_t, 256>& byte_to_codepoint();

// Decodes a vocabulary string written in the byte-level alphabet back to raw bytes.
// Returns false when it holds a code point outside the alphabet (then `out` is unspecified).
bool byte_level_decode(std::string_view token, std::string& out);

// Encodes raw bytes into the byte-level alphabet (UTF-8), as the vocabulary spells them.
std::string byte_level_encode(std::string_view bytes);

}  // namespace zero::data
