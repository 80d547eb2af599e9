// Deterministic, resumable, rank-sharded pair sampler.
//
// Each epoch is a seeded permutation of all pairs that depends only on (seed, epoch), never on the
// world size (of the epoch's pair ids under a training mix, data/mix.h: a source's pairs as many times as
// its weight gives, so "pairs" below are those of the epoch's list, a pair perhaps more than once). Every optimizer step takes the next global_batch pairs of it. Micro-step i takes the next
// slice of them, world chunks' worth (world * accum chunks over the step, sizes differing by at most one:
// chunk i * world + r is the size of rank r's micro-batch i), and deals the slice in order, each pair to
// the rank with the fewest tokens in this micro-step (its pairs' costs, pair_tokens) that has room left
// (ties: lowest rank). With length bucketing the step's pairs are first sorted by length (longest first,
// ties by pair id), only within the step, so the set of pairs per step stays the same at any world size,
// the ranks' i-th micro-batches hold similar lengths, and the ranks' loads in a micro-step come out
// nearly equal (the longest pairs spread over the ranks, not all on rank 0). The cursor (seed, epoch, position in pairs)
// is global, so a run restored on another number of ranks continues with no repeat and no gap.
// bucket_window > 1 widens bucketing to windows of that many steps: the window's pairs (a slice of the
// permutation) are sorted by length, cut into steps of global_batch, and those steps run in a seeded
// shuffled order, so each step holds similar lengths while the order of lengths stays random. Windows
// are aligned to the epoch start and depend only on (seed, epoch, global_batch, lengths), never on
// the world size; restoring such a cursor requires the same global_batch and window.
// Remainder (fewer than global_batch pairs left in an epoch): Drop skips them (counted), Pad fills the
// step with masked copies of the shortest pair (pair_mask 0).
// Token budgets (micro_tokens > 0): the step's pairs (the same pairs as above) go to ranks greedily,
// each to the rank with the fewest tokens so far (ties: lowest rank), in the step's order; each rank
// cuts its pairs, in order, into micro-batches of at most micro_tokens tokens (a pair costs what the batch
// layout makes it take, data/batcher.h's pair_tokens; a pair over the budget goes alone, never split). Every rank gets the same number of
// micro-batches (the largest over ranks; the others end with empty ones), so every rank issues the
// same collectives. Fillers are not needed and not made: global_pairs is the real pair count.
// World-invariant composition (world_invariant: pmtrain's zero.world_invariant): the step's micro-batches
// are cut from the step's pairs as if one rank took them all (pair batching: world * accum consecutive
// chunks, so a fixed batch.micro gives the same chunks at any world size; token budgets: cut_by_tokens for
// one rank), then dealt whole in the step's order (longest first under bucketing), each to the rank with
// the fewest tokens that has room (the same count for every rank, empty ones at the end). A micro-batch then holds the same pairs in the same
// order at any world size: with fixed-point gradient sums the step's gradient is the same bits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/mix.h"

namespace zero::data {

enum class RemainderPolicy : uint8_t { Drop, Pad };

struct SamplerConfig {
  uint64_t seed = 0;
  int64_t global_batch = 0;  // pairs per optimizer step, over all ranks and micro-batches
  int64_t accum = 1;         // micro-batches per rank per step
  bool shuffle = true;
  bool bucket_by_length = true;
  int64_t bucket_window = 1;  // steps per bucketing window (1 = sort within each global batch only)
  RemainderPolicy remainder = RemainderPolicy::Drop;
  int64_t micro_tokens = 0;   // > 0: micro-batches filled to this many tokens; accum is then ignored
  bool world_invariant = false;  // micro-batches composed over the whole step (see above)
  Mix mix{};                     // the training mix (data/mix.h); empty: every pair once an epoch
};

struct SamplerCursor {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t position = 0;       // pairs of this epoch's permutation already consumed
  int64_t step = 0;           // optimizer steps taken so far
  int64_t num_pairs = 0;      // dataset size the cursor belongs to (checked on restore)
  int64_t dropped_pairs = 0;  // remainder pairs skipped so far (policy Drop)
  int64_t global_batch = 0;   // checked on restore when bucket_window > 1 (windows are cut in steps)
  int64_t bucket_window = 1;
  Mix mix;                    // the training mix, names left out (checked on restore; empty: none)

  nlohmann::json to_json() const;
  static SamplerCursor from_json(const nlohmann::json& j);  // ConfigError on missing/bad keys
  bool operator==(const SamplerCursor&) const = default;
};

struct MicroBatchPlan {
  std::vector<int64_t> pair_ids;
  std::vector<uint8_t> pair_mask;  // 1 real, 0 filler
  // World-invariant composition: the micro-batch's place in the step's cut (the same at any world size);
  // -1 otherwise, and for the empty micro-batches deal_micro_batches adds to even out the ranks' counts.
  int64_t index = -1;
};

struct StepPlan {
  int64_t epoch = 0;               // epoch the step's pairs come from
  int64_t step = 0;                // 0-based optimizer step number
  int64_t global_pairs = 0;        // pairs over all ranks, fillers included (= global_batch)
  int64_t global_real_pairs = 0;   // real pairs over all ranks: the loss-gradient divisor
  std::vector<MicroBatchPlan> micro;  // this rank's accum micro-batches (some may hold no pair)
  int64_t tokens = 0;                 // this rank's token cost (its pairs' pair_tokens: what the greedy balanced)
};

// World-invariant dealing (the sampler's, and eval's under zero.world_invariant): whole micro-batches, in the
// given order, each to the least loaded rank (its pairs' pair_costs; 1 a pair when empty) that has room; every
// rank ends with the same count (empty ones last). Each keeps its place in `batches` as MicroBatchPlan::index.
void deal_micro_batches(std::vector<MicroBatchPlan> batches, const std::vector<int64_t>& pair_costs,
                        std::vector<StepPlan>& plans);

// Token budgets for pairs in a given order (the rule above): each pair to the rank with the fewest tokens
// so far (ties: lowest rank), each rank's pairs cut in order into micro-batches of at most micro_tokens
// tokens (a pair over the budget alone), every rank the same number of them (the others end with empty
// ones). plans has one entry per rank; their micro and tokens are set. pair_tokens[id]: what pair id costs
// (data/batcher.h's pair_tokens); empty = every pair costs 1. The sampler's steps and pmtrain's evaluation
// batch this way.
void cut_by_tokens(const std::vector<int64_t>& ids, const std::vector<int64_t>& pair_tokens, int64_t micro_tokens,
                   std::vector<StepPlan>& plans);

class PairSampler {
 public:
  // pair_tokens: each pair's cost in a micro-batch (data/batcher.h's pair_tokens: token budgets, length
  // bucketing, the filler choice), or empty (no bucketing).
  PairSampler(const SamplerConfig& config, int64_t num_pairs, std::vector<int64_t> pair_tokens, int rank,
              int world);

  // This rank's micro-batches for the next optimizer step; advances the cursor.
  StepPlan next_step();
  // Every rank's micro-batches for the next step ([rank][micro]); advances the cursor (tests, logs).
  std::vector<StepPlan> next_step_all_ranks();

  const SamplerCursor& cursor() const { return cursor_; }
  // Continues from a saved cursor; ConfigError if it belongs to another seed, dataset size or mix.
  void restore(const SamplerCursor& c);
  int64_t steps_per_epoch() const;
  int64_t epoch_pairs() const { return epoch_n_; }  // pairs an epoch takes (the dataset's, or the mix's)

 private:
  const std::vector<int64_t>& permutation(int64_t epoch);
  // The pairs of the step starting at cursor_.position when bucket_window > 1 (full steps only).
  std::vector<int64_t> windowed_step(const std::vector<int64_t>& perm);

  SamplerConfig cfg_;
  int64_t n_;        // pairs in the dataset
  int64_t epoch_n_;  // pairs in an epoch's list (n_ without a mix)
  std::vector<int64_t> pair_tokens_;
  int rank_, world_;
  int64_t filler_ = 0;
  SamplerCursor cursor_;
  int64_t perm_epoch_ = -1;
  std::vector<int64_t> perm_;
  int64_t window_epoch_ = -1, window_start_ = -1;
  std::vector<int64_t> window_;  // sorted window, steps already in their shuffled order
};

}  // namespace zero::data
