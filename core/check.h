// Typed errors and always-on check macros (never assert: input checks must survive NDEBUG).
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace zero {

// Base of every error the library throws on purpose; caught once in main.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
  // Every rank threw this same error (agreed on, as checkpoint::run_agreed does): a launcher prints it once.
  bool on_every_rank = false;
};
// Bad configuration: a key, a value, a combination (batch contract, stage, dtype).
struct ConfigError : Error {
  using Error::Error;
};
// Bad input data or files: data lines, checkpoints, model directories.
struct InputError : Error {
  using Error::Error;
};
// This rank stops because another rank failed and says why (pmtrain's main prints nothing for it).
struct PeerFailure : Error {
  using Error::Error;
};
// A broken invariant inside the library: a bug, not the user's fault.
struct InternalError : Error {
  using Error::Error;
};

[[noreturn]] void throw_internal(const char* file, int line, const char* expr, const std::string& msg);

}  // namespace zero

// ZERO_CHECK(cond, "fmt {}", args...): internal invariant; message names file:line and the expression.
#define ZERO_CHECK(cond, ...)                                                         \
  do {                                                                                \
    if (!(cond)) ::zero::throw_internal(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

// ZERO_REQUIRE(cond, ErrorType, "fmt", args...): a user-facing precondition with a typed error.
#define ZERO_REQUIRE(cond, ErrorType, ...)                  \
  do {                                                      \
    if (!(cond)) throw ErrorType(fmt::format(__VA_ARGS__)); \
  } while (0)
