// This machine's host name, for the words that say where a rank runs (errors, a profile's source) and for
// file names that must differ across the nodes sharing a directory (a token cache's temporary, a TensorBoard
// event file). One gethostname call site, so every message names a host the same way.
#pragma once
#include <string>

namespace zero {

// gethostname's answer; `fallback` when it fails (never empty, so a message or a file name stays well formed).
std::string host_name(const std::string& fallback = "localhost");

}  // namespace zero
