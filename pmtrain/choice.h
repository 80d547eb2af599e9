// The one parse of an enum-valued config key: its string to the enum, or a ConfigError naming the key,
// the value and every accepted spelling. Each key's spellings are one Choices table (config.cpp), which
// also prints the value back and lists it in docs/CONFIG.md.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"

namespace zero::pmtrain {

template <class E>
using Choices = std::vector<std::pair<std::string, E>>;

template <class E>
std::string choice_names(const Choices<E>& options, const char* sep = ", ") {
  std::string names;
  for (const auto& [name, e] : options) names += (names.empty() ? "" : sep) + name;
  return names;
}

template <class E>
E pick(const std::string& key, const std::string& v, const Choices<E>& options) {
  for (const auto& [name, e] : options)
    if (v == name) return e;
  throw ConfigError(fmt::format("{}: unknown value '{}' (expected {})", key, v, choice_names(options)));
}

// The spelling of a value (the first one listed for it).
template <class E>
const std::string& choice_name(E value, const Choices<E>& options) {
  for (const auto& [name, e] : options)
    if (e == value) return name;
  throw InternalError("choice_name: a value without a name");
}

}  // namespace zero::pmtrain
