// The training split and its mix (train_split.h).
#include "pmtrain/train_split.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "core/check.h"

namespace zero::pmtrain {

TrainSplit load_train_split(const Config& cfg, const LoadTrainSource& load) {
  ZERO_REQUIRE(!cfg.data.train_files.empty() || !cfg.data.train_sets.empty(), ConfigError,
               "{}: data.train_files and data.train_sets are empty: no training pairs", cfg.source);
  // A file in two sources would be trained on twice over (data.train_weights says how often instead).
  std::map<std::filesystem::path, std::string> given_by;
  auto claim = [&](const std::vector<std::string>& files, const std::string& key) {
    for (const std::string& f : files) {
      const auto [it, fresh] = given_by.emplace(std::filesystem::weakly_canonical(f), key);
      ZERO_REQUIRE(fresh || it->second == key, ConfigError, "{}: {} gives {}, which {} gives too: its pairs would "
                   "be trained on twice (data.train_weights sets how often a set is taken)", cfg.source, key, f,
                   it->second);
    }
  };
  claim(cfg.data.train_files, "data.train_files");
  for (const auto& [name, files] : cfg.data.train_sets) claim(files, "data.train_sets." + name);
  TrainSplit split;
  auto add = [&](const std::vector<std::string>& files, const std::string& set, double weight) {
    const int64_t first = split.pairs.num_pairs();
    split.pairs.append(load(files, set));
    split.mix.push_back({set.empty() ? "train_files" : set, first, split.pairs.num_pairs() - first, weight});
  };
  if (!cfg.data.train_files.empty()) add(cfg.data.train_files, "", 1.0);
  for (const auto& [name, files] : cfg.data.train_sets) {
    const auto w = cfg.data.train_weights.find(name);
    add(files, name, w == cfg.data.train_weights.end() ? 1.0 : w->second);
  }
  if (cfg.data.max_train_pairs > 0 && cfg.data.max_train_pairs < split.pairs.num_pairs()) {
    split.pairs.keep_first(cfg.data.max_train_pairs);
    for (data::MixSource& s : split.mix) s.count = std::clamp<int64_t>(cfg.data.max_train_pairs - s.first, 0, s.count);
    std::erase_if(split.mix, [](const data::MixSource& s) { return s.count == 0; });
  }
  if (cfg.data.train_sets.empty()) split.mix.clear();
  try {
    data::check_mix(split.mix, split.pairs.num_pairs());
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: data.train_weights: {}", cfg.source, e.what()));
  }
  return split;
}

std::string describe_mix(const data::Mix& mix) {
  std::string text;
  int64_t total = 0;
  for (const data::MixSource& s : mix) {
    text += fmt::format("{}{} {}{} x {} = {}", text.empty() ? "" : ", ", s.name, s.count, text.empty() ? " pairs" : "",
                        s.weight, data::epoch_pairs(s));
    total += data::epoch_pairs(s);
  }
  return fmt::format("{}: {} pairs an epoch", text, total);
}

}  // namespace zero::pmtrain
