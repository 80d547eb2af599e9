// Seeded Fisher-Yates per epoch (own RNG: std::shuffle differs between standard libraries), global
// step slicing, bucketing within a step, the chunk-to-rank map and cursor (de)serialisation.
#include "data/sampler.h"

#include <algorithm>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/splitmix.h"
#include "data/mix.h"

namespace zero::data {

namespace {

// What pair id costs in a micro-batch: its pair_tokens, or 1 when none are given (pair batching).
int64_t pair_cost(const std::vector<int64_t>& costs, int64_t id) { return costs.empty() ? int64_t(1) : costs[size_t(id)]; }

}  // namespace

nlohmann::json SamplerCursor::to_json() const {
  nlohmann::json j = {{"version", 1}, {"seed", seed}, {"epoch", epoch}, {"position", position}, {"step", step},
          {"num_pairs", num_pairs}, {"dropped_pairs", dropped_pairs}, {"global_batch", global_batch},
          {"bucket_window", bucket_window}};
  if (!mix.empty()) j["mix"] = mix_to_json(mix);  // absent: every pair once an epoch (cursors before mixes)
  return j;
}

SamplerCursor SamplerCursor::from_json(const nlohmann::json& j) {
  try {
    ZERO_REQUIRE(j.at("version").get<int>() == 1, ConfigError, "sampler cursor version {} is not 1",
                 j.at("version").dump());
    SamplerCursor c;
    c.seed = j.at("seed").get<uint64_t>();
    c.epoch = j.at("epoch").get<int64_t>();
    c.position = j.at("position").get<int64_t>();
    c.step = j.at("step").get<int64_t>();
    c.num_pairs = j.at("num_pairs").get<int64_t>();
    c.dropped_pairs = j.at("dropped_pairs").get<int64_t>();
    c.global_batch = j.at("global_batch").get<int64_t>();
    c.bucket_window = j.at("bucket_window").get<int64_t>();
    if (j.contains("mix")) c.mix = mix_from_json(j.at("mix"));
    ZERO_REQUIRE(c.epoch >= 0 && c.position >= 0 && c.position <= epoch_pairs(c.mix, c.num_pairs), ConfigError,
                 "sampler cursor {} is out of range", j.dump());
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("sampler cursor {} is malformed: {}", j.dump(), e.what()));
  }
}

PairSampler::PairSampler(const SamplerConfig& config, int64_t num_pairs, std::vector<int64_t> pair_tokens,
                         int rank, int world)
    : cfg_(config), n_(num_pairs), pair_tokens_(std::move(pair_tokens)), rank_(rank), world_(world) {
  ZERO_REQUIRE(n_ > 0, ConfigError, "sampler: the dataset has no pairs");
  check_mix(cfg_.mix, n_);
  for (MixSource& s : cfg_.mix) s.name.clear();  // the cursor records the mix without its names
  epoch_n_ = data::epoch_pairs(cfg_.mix, n_);
  ZERO_REQUIRE(world_ >= 1 && rank_ >= 0 && rank_ < world_, ConfigError, "sampler: rank {} of world {}", rank_,
               world_);
  ZERO_REQUIRE(cfg_.accum >= 1, ConfigError, "sampler: accum must be >= 1, got {}", cfg_.accum);
  ZERO_REQUIRE(cfg_.micro_tokens >= 0, ConfigError, "sampler: micro_tokens must be >= 0, got {}", cfg_.micro_tokens);
  ZERO_REQUIRE(cfg_.micro_tokens > 0 || cfg_.global_batch >= world_ * cfg_.accum, ConfigError,
               "global_batch {} < world {} x accum {}: every micro-batch needs at least one pair",
               cfg_.global_batch, world_, cfg_.accum);
  ZERO_REQUIRE(cfg_.remainder == RemainderPolicy::Pad || cfg_.global_batch <= epoch_n_, ConfigError,
               "global_batch {} exceeds the {} pairs of an epoch with remainder policy drop", cfg_.global_batch,
               epoch_n_);
  ZERO_REQUIRE(pair_tokens_.empty() || int64_t(pair_tokens_.size()) == n_, InternalError, "{} lengths for {} pairs",
               pair_tokens_.size(), n_);
  ZERO_REQUIRE(cfg_.bucket_window >= 1, ConfigError, "sampler: bucket_window must be >= 1, got {}",
               cfg_.bucket_window);
  if (!pair_tokens_.empty()) filler_ = std::min_element(pair_tokens_.begin(), pair_tokens_.end()) - pair_tokens_.begin();
  cursor_.seed = cfg_.seed;
  cursor_.num_pairs = n_;
  cursor_.mix = cfg_.mix;
  cursor_.global_batch = cfg_.global_batch;
  cursor_.bucket_window = cfg_.bucket_window;
}

int64_t PairSampler::steps_per_epoch() const {
  return cfg_.remainder == RemainderPolicy::Drop ? epoch_n_ / cfg_.global_batch
                                                 : (epoch_n_ + cfg_.global_batch - 1) / cfg_.global_batch;
}

void PairSampler::restore(const SamplerCursor& c) {
  ZERO_REQUIRE(c.seed == cfg_.seed, ConfigError, "sampler cursor has seed {} but the config says {}", c.seed,
               cfg_.seed);
  ZERO_REQUIRE(c.num_pairs == n_, ConfigError,
               "sampler cursor was saved for {} pairs but the dataset has {} (data changed since the checkpoint)",
               c.num_pairs, n_);
  ZERO_REQUIRE(c.mix == cfg_.mix, ConfigError,
               "sampler cursor was saved with the training mix {} but the config gives {} ([first pair, pairs, "
               "weight] per source; data.train_sets and data.train_weights): resume with the same mix",
               mix_to_json(c.mix).dump(), mix_to_json(cfg_.mix).dump());
  if (cfg_.bucket_by_length && cfg_.bucket_window > 1)
    ZERO_REQUIRE(c.global_batch == cfg_.global_batch && c.bucket_window == cfg_.bucket_window, ConfigError,
                 "sampler cursor was saved with global_batch {} and bucket_window {}, the config says {} and {}: "
                 "windowed bucketing cuts steps by the global batch, so resume with the same values",
                 c.global_batch, c.bucket_window, cfg_.global_batch, cfg_.bucket_window);
  cursor_ = c;
  cursor_.global_batch = cfg_.global_batch;
  cursor_.bucket_window = cfg_.bucket_window;
}

const std::vector<int64_t>& PairSampler::permutation(int64_t epoch) {
  if (perm_epoch_ == epoch) return perm_;
  perm_ = epoch_pair_ids(cfg_.mix, n_, cfg_.seed, epoch);
  if (cfg_.shuffle) {
    splitmix_shuffle(perm_, cfg_.seed ^ (0xD1B54A32D192ED03ull * uint64_t(epoch + 1)));
  }
  perm_epoch_ = epoch;
  return perm_;
}

std::vector<int64_t> PairSampler::windowed_step(const std::vector<int64_t>& perm) {
  const int64_t G = cfg_.global_batch;
  const int64_t window_pairs = cfg_.bucket_window * G;
  const int64_t start = cursor_.position / window_pairs * window_pairs;
  if (window_epoch_ != cursor_.epoch || window_start_ != start) {
    // Only whole steps take part; a partial last step (remainder) is handled by the caller unsorted.
    const int64_t full = std::min(window_pairs, (epoch_n_ - start) / G * G);
    window_.assign(perm.begin() + start, perm.begin() + start + full);
    std::sort(window_.begin(), window_.end(), [&](int64_t a, int64_t b) {
      return pair_tokens_[a] != pair_tokens_[b] ? pair_tokens_[a] > pair_tokens_[b] : a < b;
    });
    // Shuffle the order of the window's steps so long and short steps interleave.
    const int64_t steps = full / G;
    std::vector<int64_t> order(steps);
    std::iota(order.begin(), order.end(), int64_t(0));
    splitmix_shuffle(order, cfg_.seed ^ (0x8CB92BA72F3D8DD7ull * uint64_t(cursor_.epoch + 1)) ^ uint64_t(start));
    std::vector<int64_t> shuffled;
    shuffled.reserve(full);
    for (int64_t k : order) shuffled.insert(shuffled.end(), window_.begin() + k * G, window_.begin() + (k + 1) * G);
    window_ = std::move(shuffled);
    window_epoch_ = cursor_.epoch;
    window_start_ = start;
  }
  const int64_t at = cursor_.position - start;
  return {window_.begin() + at, window_.begin() + at + G};
}

std::vector<StepPlan> PairSampler::next_step_all_ranks() {
  const int64_t G = cfg_.global_batch;
  if (cursor_.position >= epoch_n_) {
    ++cursor_.epoch;
    cursor_.position = 0;
  }
  if (epoch_n_ - cursor_.position < G && cfg_.remainder == RemainderPolicy::Drop) {
    cursor_.dropped_pairs += epoch_n_ - cursor_.position;
    ++cursor_.epoch;
    cursor_.position = 0;
  }
  const auto& perm = permutation(cursor_.epoch);
  const int64_t take = std::min(G, epoch_n_ - cursor_.position);
  const bool windowed = cfg_.bucket_by_length && !pair_tokens_.empty() && cfg_.bucket_window > 1 && take == G;
  std::vector<int64_t> ids = windowed ? windowed_step(perm)
                                      : std::vector<int64_t>(perm.begin() + cursor_.position,
                                                             perm.begin() + cursor_.position + take);
  if (cfg_.bucket_by_length && !pair_tokens_.empty())
    std::sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) {
      return pair_tokens_[a] != pair_tokens_[b] ? pair_tokens_[a] > pair_tokens_[b] : a < b;
    });
  std::vector<StepPlan> plans(world_);
  for (auto& p : plans) {
    p.epoch = cursor_.epoch;
    p.step = cursor_.step;
    p.global_pairs = cfg_.micro_tokens > 0 ? take : G;
    p.global_real_pairs = take;
    p.micro.resize(cfg_.accum);
  }
  const auto cost = [&](int64_t id) { return pair_cost(pair_tokens_, id); };
  if (cfg_.micro_tokens > 0 && cfg_.world_invariant) {
    std::vector<StepPlan> one(1);
    cut_by_tokens(ids, pair_tokens_, cfg_.micro_tokens, one);
    deal_micro_batches(std::move(one[0].micro), pair_tokens_, plans);
  } else if (cfg_.micro_tokens > 0) {
    cut_by_tokens(ids, pair_tokens_, cfg_.micro_tokens, plans);
  }
  if (cfg_.micro_tokens > 0) {
    cursor_.position += take;
    ++cursor_.step;
    return plans;
  }
  std::vector<uint8_t> mask(take, 1);
  ids.resize(G, filler_);  // Pad policy: masked fillers at the end
  mask.resize(G, 0);
  const int64_t chunks = int64_t(world_) * cfg_.accum;

  if (cfg_.world_invariant) {  // chunk k: the k-th run of the step's pairs, sizes as the chunks' below
    std::vector<MicroBatchPlan> batches(static_cast<size_t>(chunks));
    for (int64_t k = 0, at = 0; k < chunks; ++k) {
      const int64_t size = G / chunks + (k < G % chunks ? 1 : 0);
      batches[size_t(k)].pair_ids.assign(ids.begin() + at, ids.begin() + at + size);
      batches[size_t(k)].pair_mask.assign(mask.begin() + at, mask.begin() + at + size);
      at += size;
    }
    deal_micro_batches(std::move(batches), pair_tokens_, plans);
    cursor_.position += take;
    ++cursor_.step;
    return plans;
  }

  // Micro-step i takes the next slice of the step's pairs (its world chunks' worth); within the slice each
  // pair goes, in order, to the rank with the fewest tokens in this micro-step that has room left (room:
  // its chunk's size; ties: lowest rank). Sorted longest first, the ranks' loads come out nearly equal, and
  // every micro-batch still holds similar lengths. (Cutting the sorted slice into contiguous chunks instead
  // gave rank 0 the longest pairs of every step, and the others waited for it.)
  int64_t at = 0;
  std::vector<int64_t> room(world_), load(world_);
  for (int64_t i = 0; i < cfg_.accum; ++i) {
    int64_t slice = 0;
    for (int r = 0; r < world_; ++r) {
      const int64_t k = i * world_ + r;
      slice += room[r] = G / chunks + (k < G % chunks ? 1 : 0);
      load[r] = 0;
    }
    for (int64_t j = at; j < at + slice; ++j) {
      int r = -1;
      for (int q = 0; q < world_; ++q)
        if (room[q] > 0 && (r < 0 || load[q] < load[r])) r = q;
      MicroBatchPlan& mb = plans[r].micro[i];
      mb.pair_ids.push_back(ids[j]);
      mb.pair_mask.push_back(mask[j]);
      load[r] += cost(ids[j]);
      plans[r].tokens += cost(ids[j]);
      --room[r];
    }
    at += slice;
  }
  cursor_.position += take;
  ++cursor_.step;
  return plans;
}

void deal_micro_batches(std::vector<MicroBatchPlan> batches, const std::vector<int64_t>& pair_costs,
                        std::vector<StepPlan>& plans) {
  const size_t world = plans.size();
  const size_t room = std::max<size_t>(1, (batches.size() + world - 1) / world);
  for (auto& p : plans) p.micro.clear();
  for (size_t k = 0; k < batches.size(); ++k) {
    MicroBatchPlan& mb = batches[k];
    size_t r = world;
    for (size_t q = 0; q < world; ++q)
      if (plans[q].micro.size() < room && (r == world || plans[q].tokens < plans[r].tokens)) r = q;
    for (int64_t id : mb.pair_ids) plans[r].tokens += pair_cost(pair_costs, id);
    mb.index = int64_t(k);
    plans[r].micro.push_back(std::move(mb));
  }
  for (auto& p : plans) p.micro.resize(room);  // empty micro-batches: same collectives on every rank
}

void cut_by_tokens(const std::vector<int64_t>& ids, const std::vector<int64_t>& pair_costs, int64_t micro_tokens,
                   std::vector<StepPlan>& plans) {
  const auto pair_tokens = [&](int64_t id) { return pair_cost(pair_costs, id); };
  const size_t world = plans.size();
  std::vector<std::vector<int64_t>> mine(world);
  for (int64_t id : ids) {  // each pair to the least loaded rank, in the given order
    size_t r = 0;
    for (size_t q = 1; q < world; ++q)
      if (plans[q].tokens < plans[r].tokens) r = q;
    mine[r].push_back(id);
    plans[r].tokens += pair_tokens(id);
  }
  size_t most = 1;
  for (size_t r = 0; r < world; ++r) {
    auto& micro = plans[r].micro;
    micro.clear();
    int64_t filled = 0;
    for (int64_t id : mine[r]) {
      const int64_t t = pair_tokens(id);
      if (micro.empty() || (filled + t > micro_tokens && !micro.back().pair_ids.empty())) {
        micro.emplace_back();
        filled = 0;
      }
      micro.back().pair_ids.push_back(id);
      micro.back().pair_mask.push_back(1);
      filled += t;
    }
    most = std::max(most, micro.size());
  }
  for (auto& p : plans) p.micro.resize(most);  // empty micro-batches: same collectives on every rank
}

StepPlan PairSampler::next_step() { return std::move(next_step_all_ranks()[rank_]); }

}  // namespace zero::data
