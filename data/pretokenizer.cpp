// PCRE2 compile (UTF | UCP, JIT when available) and the Isolated split loop.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/pretokenizer.h"

#include <pcre2.h>

#include "core/check.h"

namespace zero::data {

struct Pretokenizer::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  bool jit = false;
  ~Impl() {
    if (match) pcre2_match_data_free(match);
    if (code) pcre2_code_free(code);
  }
};

Pretokenizer::Pretokenizer(const std::string& pattern, const std::string& where) : impl_(new Impl) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  // UCP makes \s, \p{..} and (?i) Unicode-aware as in the Rust regex engines tokenizers uses.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw ConfigError(fmt::format("{}: pre-tokenizer regex does not compile at offset {}: {}", where, offset,
                                  reinterpret_cast<const char*>(msg)));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
  impl_->match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

void Pretokenizer::split(std::string_view text, std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE n = text.size();
  PCRE2_SIZE pos = 0, emitted = 0;
  while (pos < n) {
    // The caller has validated UTF-8 (NFC step), so skip PCRE2's own check on every call.
    const int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, n, pos, PCRE2_NO_UTF_CHECK, impl_->match,
                                                nullptr)
                              : pcre2_match(impl_->code, subject, n, pos, PCRE2_NO_UTF_CHECK, impl_->match, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    ZERO_REQUIRE(rc >= 0, InputError, "pre-tokenizer regex failed with PCRE2 error {} at byte {}", rc, pos);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(impl_->match);
    const PCRE2_SIZE b = ov[0], e = ov[1];
    if (b > emitted) {  // an unmatched gap is a piece too, once (after an empty match as after any other)
      out.push_back(text.substr(emitted, b - emitted));
      emitted = b;
    }
    if (e > b) {
      out.push_back(text.substr(b, e - b));
      pos = emitted = e;
    } else {
      // An empty match yields no piece; step one code point so the loop always advances.
      pos = b + 1;
      while (pos < n && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  if (emitted < n) out.push_back(text.substr(emitted));
}

}  // namespace zero::data
