// What every fuzz target checks besides "no crash, no hang, no leak, no UB" (the sanitizers' part):
// a parser given bad input throws zero::Error whose message names the input (file, source or key), and
// nothing else escapes. Any other exception (nlohmann::json::type_error, std::out_of_range, ...) leaves
// LLVMFuzzerTestOneInput, and libFuzzer (or the replay driver) reports it as a crash.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unistd.h>

#include "core/check.h"

namespace zero::fuzz {

// Aborts (a finding) with `why` on stderr.
[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "fuzz: %s\n", why.c_str());
  std::abort();
}

inline void require(bool ok, const std::string& why) {
  if (!ok) fail(why);
}

// Runs `parse`; a zero::Error must name `name` in its message.
template <class F>
void expect_clean_error(const std::string& name, F&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    require(std::string_view(e.what()).find(name) != std::string_view::npos,
            "error does not name '" + name + "': " + e.what());
  }
}

// A scratch file of this process (the parsers under test read files): written anew for every input;
// the target removes it when done.
inline std::string write_scratch(const char* suffix, const uint8_t* data, size_t size) {
  const std::string path = "/tmp/zero_fuzz_" + std::to_string(getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  require(f != nullptr, "cannot create " + path);
  if (size > 0) require(std::fwrite(data, 1, size, f) == size, "cannot write " + path);
  std::fclose(f);
  return path;
}

}  // namespace zero::fuzz
