// The one parse of an enum-valued config key: its string to the enum, or a ConfigError naming the key,
// the value and every accepted spelling.
#pragma once
#include <initializer_list>
#include <string>
#include <utility>

#include "core/check.h"

namespace zero::pmtrain {

template <class E>
E pick(const std::string& key, const std::string& v, std::initializer_list<std::pair<const char*, E>> options) {
  std::string names;
  for (const auto& [name, e] : options) {
    if (v == name) return e;
    names += names.empty() ? name : std::string(", ") + name;
  }
  throw ConfigError(fmt::format("{}: unknown value '{}' (expected {})", key, v, names));
}

}  // namespace zero::pmtrain
