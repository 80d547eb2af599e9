#include "pmtrain/config_changes.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace zero::pmtrain {

namespace {
using Flat = std::vector<std::pair<std::string, std::string>>;  // key, value text; in the document's order

void set_flow(YAML::Node node) {  // a handle: the clone's nodes themselves
  if (!node.IsSequence() && !node.IsMap()) return;
  node.SetStyle(YAML::EmitterStyle::Flow);
  if (node.IsSequence())
    for (YAML::Node item : node) set_flow(item);
  else
    for (auto kv : node) set_flow(kv.second);
}

void flatten(const YAML::Node& node, const std::string& prefix, Flat& out) {
  if (node.IsMap() && node.size() > 0) {
    for (const auto& kv : node)
      flatten(kv.second, prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar(), out);
    return;
  }
  if (node.IsScalar()) {
    out.emplace_back(prefix, node.Scalar());
    return;
  }
  // A list, an empty mapping, a null: one line. A node read from text keeps its block style, which the emitter's
  // YAML::Flow does not override: each level is set to flow itself.
  YAML::Node one_line = YAML::Clone(node);
  set_flow(one_line);
  YAML::Emitter flow;
  flow << one_line;
  out.emplace_back(prefix, flow.c_str());
}

Flat flat_config(const std::string& text, const std::string& what) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: not a readable config: {}", what, e.what()));
  }
  ZERO_REQUIRE(root.IsMap(), ConfigError, "{}: not a config (a mapping of sections)", what);
  Flat out;
  flatten(root, "", out);
  return out;
}

const std::string* find(const Flat& f, const std::string& key) {
  const auto it = std::find_if(f.begin(), f.end(), [&](const auto& kv) { return kv.first == key; });
  return it == f.end() ? nullptr : &it->second;
}
}  // namespace

std::vector<ConfigChange> config_changes(const std::string& before_yaml, const std::string& after_yaml,
                                         const std::string& what) {
  const Flat before = flat_config(before_yaml, what), after = flat_config(after_yaml, what);
  std::vector<ConfigChange> changes;
  for (const auto& [key, value] : after) {
    const std::string* was = find(before, key);
    if (!was || *was != value) changes.push_back({key, was ? std::optional(*was) : std::nullopt, value});
  }
  for (const auto& [key, value] : before)
    if (!find(after, key)) changes.push_back({key, value, std::nullopt});
  return changes;
}

std::string describe_changes(const std::vector<ConfigChange>& changes, size_t most) {
  auto text = [](const std::optional<std::string>& v) {
    return !v ? std::string("(none)") : v->empty() ? std::string("\"\"") : *v;
  };
  std::string out;
  for (size_t i = 0; i < changes.size() && i < most; ++i)
    out += fmt::format("{}{} {} -> {}", i ? "; " : "", changes[i].key, text(changes[i].before), text(changes[i].after));
  if (changes.size() > most) out += fmt::format("; and {} more", changes.size() - most);
  return out;
}

std::string settings_changed_line(const std::string& saved_config, const Config& now, const std::string& checkpoint_dir) {
  std::vector<ConfigChange> changes;
  try {
    changes = config_changes(saved_config, to_yaml(now), fmt::format("{}/manifest.json's config", checkpoint_dir));
  } catch (const ConfigError& e) {
    return fmt::format("the checkpoint's settings cannot be compared with this run's: {}", e.what());
  }
  std::erase_if(changes, [](const ConfigChange& c) { return c.key == "run.resume" || c.key == "run.start_over"; });
  if (changes.empty()) return "";
  return fmt::format("{} setting{} differ{} from the run that saved the checkpoint: {}", changes.size(),
                     changes.size() > 1 ? "s" : "", changes.size() > 1 ? "" : "s", describe_changes(changes, 12));
}

}  // namespace zero::pmtrain
