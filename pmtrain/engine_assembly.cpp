#include "pmtrain/engine_assembly.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "comm/hybrid_groups.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/math/fixed_point.h"

namespace zero::pmtrain {

DType accum_dtype_for(const Config& cfg, int world, int64_t accum_steps) {
  if (cfg.zero.world_invariant) {
    ZERO_REQUIRE(!cfg.zero.accum_dtype, ConfigError,
                 "{}: zero.world_invariant sums gradients in fixed point: leave zero.accum_dtype at auto (got {})",
                 cfg.source, dtype_name(*cfg.zero.accum_dtype));
    return DType::FX64;
  }
  if (cfg.zero.accum_dtype) return *cfg.zero.accum_dtype;
  const bool sums = world > 1 || accum_steps != 1 || cfg.batch.micro_tokens > 0;
  return sums ? DType::F32 : cfg.zero.param_dtype;
}

int shard_group_ranks(const Config& cfg, int world) {
  ZERO_CHECK(cfg.zero.shard_ranks != ZeroSection::kShardRanksNode || world == 1,
             "zero.shard_ranks: node reached shard_group_ranks unresolved (resolve_shard_ranks)");
  const int n = int(std::min<int64_t>(cfg.zero.shard_ranks, world));  // (any value past the world: one group)
  if (!hybrid_sharding(n, world)) return world;
  ZERO_REQUIRE(world % n == 0, ConfigError,
               "{}: zero.shard_ranks {} does not divide the world of {} ranks: shard groups must be equal (a divisor of "
               "{}, for example the ranks of a node; 0 = one group of all ranks)",
               cfg.source, n, world, world);
  return int(n);
}

void resolve_shard_ranks(Config& cfg, int node_ranks) {
  if (!cfg.zero.shard_ranks_node) return;
  ZERO_REQUIRE(node_ranks > 0, ConfigError, "{}: {}", cfg.source,
               node_placement_error("zero.shard_ranks node", "zero.shard_ranks"));
  cfg.zero.shard_ranks = node_ranks;
}

std::string shard_placement_warning(const Config& cfg, const std::vector<int>& node_of_rank) {
  const int world = int(node_of_rank.size());
  const int S = shard_group_ranks(cfg, world);
  const int spanning = S == world ? 0 : shard_groups_spanning_nodes(node_of_rank, S);
  if (spanning == 0) return "";
  const int L = node_block_ranks(node_of_rank);
  return fmt::format(
      "warning: {} of {} shard groups of {} consecutive ranks (zero.shard_ranks {}) hold ranks of more than one node, "
      "so their gathers and reductions cross the network: {}",
      spanning, world / S, S, S,
      L > 0 ? fmt::format("a node holds {} ranks here; zero.shard_ranks node (or a divisor of {}) keeps each group on one node", L, L)
            : fmt::format("the ranks are not placed in blocks per node ({}?); place them in blocks ({})",
                          kRoundRobinPlacement, kBlockPlacement));
}

std::string stage_text(const Config& cfg, int world) {
  const int S = shard_group_ranks(cfg, world);
  if (S == world) return fmt::format("stage {}", cfg.zero.stage);
  return fmt::format("stage {} in shard groups of {} rank{}, replicated {}x (zero.shard_ranks{})", cfg.zero.stage, S,
                     S == 1 ? "" : "s", world / S, cfg.zero.shard_ranks_node ? " node" : "");
}

size_t bucket_elements_for(const Config& cfg) {
  if (cfg.zero.bucket_elements > 0) return size_t(cfg.zero.bucket_elements);
  return cfg.backend == Backend::Cpu ? size_t(kCpuBucketElements) : EngineConfig{}.bucket_elements;
}

EngineConfig engine_config(const Config& cfg, int world, int64_t accum_steps, int64_t total_steps) {
  EngineConfig ec;
  ec.stage = int(cfg.zero.stage);
  ec.bucket_elements = bucket_elements_for(cfg);
  ec.prefetch_depth = int(cfg.zero.prefetch_depth);
  ec.param_dtype = cfg.zero.param_dtype;
  ec.accum_dtype = accum_dtype_for(cfg, world, accum_steps);
  ec.reduce_dtype = cfg.zero.reduce_dtype;
  if (cfg.zero.world_invariant) {
    ZERO_REQUIRE(cfg.zero.reduce_dtype == DType::F32, ConfigError,
                 "{}: zero.world_invariant puts fixed-point sums on the wire: leave zero.reduce_dtype at fp32 (got {})",
                 cfg.source, dtype_name(cfg.zero.reduce_dtype));
    ec.reduce_dtype = DType::FX64;
  }
  // auto: split under bf16 params, unless the master lives on the host (zero.offload), where it is fp32.
  ec.split_master = cfg.zero.master.value_or(cfg.zero.param_dtype == DType::BF16 && !cfg.zero.offload_optimizer);
  ec.offload_optimizer = cfg.zero.offload_optimizer;
  ec.offload_threads = int(cfg.threads);
  ec.accum_steps = int(accum_steps);
  ec.clip_norm = float(cfg.optim.clip_norm);
  ec.adamw = {float(cfg.optim.beta1), float(cfg.optim.beta2), float(cfg.optim.eps),
              float(cfg.optim.weight_decay)};
  const int64_t warmup = cfg.optim.warmup_steps > 0 ? cfg.optim.warmup_steps
                                                     : int64_t(std::ceil(cfg.optim.warmup_ratio * total_steps));
  ec.schedule = {cfg.optim.schedule, float(cfg.optim.lr), warmup, total_steps,
                 float(cfg.optim.min_lr_ratio)};
  validate(ec);
  return ec;
}

ResolvedBatch run_batch(const Config& cfg, int world) {
  BatchSpec spec{cfg.batch.global, cfg.batch.micro, cfg.batch.accum};
  // World size: the launcher decides; a pinned batch.world must agree unless accumulation can absorb it.
  if (cfg.batch.world > 0 && cfg.batch.world != world) {
    ZERO_REQUIRE(cfg.batch.accum == 0 || cfg.batch.global == 0, ConfigError,
                 "{}: batch.world is {} but the launcher started {} ranks, and batch.global, micro and accum are all "
                 "fixed; drop batch.accum to let it be derived",
                 cfg.source, cfg.batch.world, world);
    spec.accum = 0;
  }
  // Fixed-point sums hold a bounded number of micro-batches a step (core/math/fixed_point.h): checked here,
  // before any data is read. A token-budget step has at most one micro-batch a pair, so world ranks make at
  // most global + world - 1 micro-steps.
  if (cfg.zero.world_invariant) {
    // Its micro-batches are cut by the budget: one chosen by the GPUs' memory would cut them apart at another
    // world size or stage.
    ZERO_REQUIRE(!cfg.batch.micro_tokens_auto, ConfigError,
                 "{}: zero.world_invariant needs a budget that stays the same at every world size and stage; "
                 "batch.micro_tokens auto chooses one by the memory they leave: give a number of tokens",
                 cfg.source);
    const int64_t most = cfg.batch.micro_tokens > 0 ? cfg.batch.global + world - 1
                         : cfg.batch.micro > 0    ? cfg.batch.global / cfg.batch.micro
                                                  : 0;
    ZERO_REQUIRE(most <= math::kFixedMaxTerms, ConfigError,
                 "{}: zero.world_invariant sums at most {} micro-batches a step; batch.global {} could make {}: "
                 "use a smaller batch.global or a larger batch.micro",
                 cfg.source, math::kFixedMaxTerms, cfg.batch.global, most);
  }
  if (cfg.batch.micro_tokens > 0) {
    // Token budgets: a step is still `global` pairs; its micro-steps are as many as the budget needs (the
    // engine's accumulation is set per step).
    ZERO_REQUIRE(cfg.batch.global > 0 && cfg.batch.micro == 0 && spec.accum == 0, ConfigError,
                 "{}: batch.micro_tokens sets the micro-batches by tokens: give batch.global (pairs per step) and "
                 "leave batch.micro and batch.accum at 0 (got micro {}, accum {}), or set batch.micro_tokens=0 for "
                 "micro-batches of batch.micro pairs",
                 cfg.source, cfg.batch.micro, spec.accum);
    return {cfg.batch.global, std::max<int64_t>(1, cfg.batch.micro_tokens / token_budget_floor(cfg.data)), 1, world};
  }
  // World-invariant micro-batches are chunks of batch.micro pairs at any world size; derived from
  // global / (accum x world), they would change with it.
  ZERO_REQUIRE(!cfg.zero.world_invariant || cfg.batch.micro > 0, ConfigError,
               "{}: zero.world_invariant needs batch.micro (or batch.micro_tokens): a micro-batch's pairs must not "
               "depend on the world size",
               cfg.source);
  return resolve_batch(spec, world);
}

}  // namespace zero::pmtrain
