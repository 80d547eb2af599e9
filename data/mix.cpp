// A training mix's epochs (data/mix.h).
#include "data/mix.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/splitmix.h"

namespace zero::data {

namespace {

int64_t whole_copies(const MixSource& s) { return int64_t(std::floor(s.weight)); }
// r = round(f * count): the pairs of the source's window an epoch.
int64_t window_pairs(const MixSource& s) {
  return int64_t(std::llround((s.weight - std::floor(s.weight)) * double(s.count)));
}

}  // namespace

int64_t epoch_pairs(const MixSource& s) { return whole_copies(s) * s.count + window_pairs(s); }

int64_t epoch_pairs(const Mix& mix, int64_t num_pairs) {
  if (mix.empty()) return num_pairs;
  int64_t n = 0;
  for (const MixSource& s : mix) n += epoch_pairs(s);
  return n;
}

std::vector<int64_t> epoch_pair_ids(const Mix& mix, int64_t num_pairs, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> ids;
  if (mix.empty()) {
    ids.resize(size_t(num_pairs));
    std::iota(ids.begin(), ids.end(), int64_t(0));
    return ids;
  }
  ids.reserve(size_t(epoch_pairs(mix, num_pairs)));
  for (size_t k = 0; k < mix.size(); ++k) {
    const MixSource& s = mix[k];
    for (int64_t copy = 0; copy < whole_copies(s); ++copy)
      for (int64_t i = 0; i < s.count; ++i) ids.push_back(s.first + i);
    const int64_t r = window_pairs(s);
    if (r == 0) continue;
    // The source's own order, the same every epoch, so consecutive epochs' windows cover it evenly.
    std::vector<int64_t> order(size_t(s.count));
    std::iota(order.begin(), order.end(), s.first);
    splitmix_shuffle(order, seed ^ (0xA24BAED4963EE407ull * uint64_t(k + 1)));
    const int64_t start = int64_t((__uint128_t(uint64_t(epoch)) * uint64_t(r)) % uint64_t(s.count));
    for (int64_t j = 0; j < r; ++j) ids.push_back(order[size_t((start + j) % s.count)]);
  }
  return ids;
}

void check_mix(const Mix& mix, int64_t num_pairs) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const MixSource& s : mix) {
    ZERO_REQUIRE(s.count > 0 && s.first >= 0 && s.first + s.count <= num_pairs, ConfigError,
                 "training mix: source '{}' (pairs {} .. {}) is not within the {} pairs", s.name, s.first,
                 s.first + s.count - 1, num_pairs);
    ZERO_REQUIRE(std::isfinite(s.weight) && s.weight > 0, ConfigError,
                 "training mix: source '{}' has weight {}; a weight is a positive number of passes an epoch", s.name,
                 s.weight);
    ZERO_REQUIRE(epoch_pairs(s) > 0, ConfigError,
                 "training mix: source '{}' at weight {} takes none of its {} pairs an epoch (the least weight that "
                 "takes one is {:.3g})", s.name, s.weight, s.count, 0.5 / double(s.count));
    ranges.emplace_back(s.first, s.first + s.count);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    ZERO_REQUIRE(ranges[i].first >= ranges[i - 1].second, InternalError, "training mix: sources overlap");
}

nlohmann::json mix_to_json(const Mix& mix) {
  nlohmann::json j = nlohmann::json::array();
  for (const MixSource& s : mix) j.push_back({s.first, s.count, s.weight});
  return j;
}

Mix mix_from_json(const nlohmann::json& j) {
  Mix mix;
  for (const nlohmann::json& e : j) mix.push_back({"", e.at(0).get<int64_t>(), e.at(1).get<int64_t>(), e.at(2).get<double>()});
  return mix;
}

}  // namespace zero::data
