// A training mix: the training pairs as sources (consecutive pair ranges of one dataset), each taken a
// weight's worth of times an epoch (pmtrain's data.train_sets with data.train_weights; open-instruct's
// dataset_mixer and OpenRLHF's dataset_probs in spirit, but counted, not drawn, so an epoch is the same
// size every time and resumes exactly). A source of `count` pairs and weight w = q + f (q whole, 0 <= f < 1)
// gives an epoch
//   q copies of each of its pairs, and
//   r = round(f * count) more: a window of r pairs of the source's own fixed shuffle (seeded by the seed
//   and the source's place), starting at epoch * r and wrapping around,
// so a source at 0.5 gives half its pairs each epoch, the other half the next, every pair once in two.
// The epoch's list of pair ids (sources in order) is what the sampler then shuffles: with no mix (or
// every weight 1) it is every pair once, in order, as before mixes existed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zero::data {

struct MixSource {
  std::string name;  // reported (pmtrain: the data.train_sets name, or data.train_files)
  int64_t first = 0;  // pair ids [first, first + count)
  int64_t count = 0;
  double weight = 1.0;  // > 0

  bool operator==(const MixSource&) const = default;
};
using Mix = std::vector<MixSource>;

// Pairs source s gives an epoch: q * count + round(f * count).
int64_t epoch_pairs(const MixSource& s);
// Pairs an epoch holds under the mix (num_pairs when the mix is empty).
int64_t epoch_pairs(const Mix& mix, int64_t num_pairs);

// Epoch `epoch`'s pair ids, unshuffled (sources in order; each source's whole copies, then its window).
// An empty mix: 0 .. num_pairs - 1.
std::vector<int64_t> epoch_pair_ids(const Mix& mix, int64_t num_pairs, uint64_t seed, int64_t epoch);

// ConfigError unless the sources are disjoint ranges in [0, num_pairs), each with pairs and a positive,
// finite weight that gives it at least one pair an epoch (naming the source).
void check_mix(const Mix& mix, int64_t num_pairs);

// The mix as a sampler cursor records it (restoring checks it is unchanged): [[first, count, weight], ...].
nlohmann::json mix_to_json(const Mix& mix);
Mix mix_from_json(const nlohmann::json& j);  // names empty

}  // namespace zero::data
