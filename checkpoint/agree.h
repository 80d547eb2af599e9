// Collective agreement on success: every rank runs its local part, then one scalar all-reduce tells all
// ranks whether any failed; if one did, the lowest failing rank's error (type and message) is broadcast
// and every rank throws the same error. So a rank that fails never leaves the others blocked in a later
// collective, and every rank reports the same cause. Uses only the Communicator; main thread only.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "comm/communicator.h"

namespace zero::checkpoint {

enum class ErrorKind : int { Input = 1, Config = 2, Save = 3, Other = 4 };

struct Failure {
  ErrorKind kind = ErrorKind::Other;
  std::string message;
};

// Runs f; returns the error it threw (zero errors keep their type, anything else becomes Other).
std::optional<Failure> capture(const std::function<void()>& f);
// Collective: nullopt when every rank succeeded, else the lowest failing rank's failure (on every rank).
std::optional<Failure> agree(Communicator& comm, const std::optional<Failure>& local);
[[noreturn]] void rethrow(const Failure& f);
// capture + agree + rethrow.
void run_agreed(Communicator& comm, const std::function<void()>& f);

}  // namespace zero::checkpoint
