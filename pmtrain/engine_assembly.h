// The engine's configuration and the batch from a pmtrain config, assembled in one place for the trainer
// (which runs them) and `pmtrain plan` / the planner (which size buffers and activations from the same
// values).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pmtrain/config.h"
#include "zero/engine_config.h"

namespace zero::pmtrain {

// At `world` ranks with accum_steps micro-steps a step (the batch contract's); total_steps for the LR
// schedule (warmup_ratio is taken of it).
EngineConfig engine_config(const Config& cfg, int world, int64_t accum_steps, int64_t total_steps);

// zero.bucket_elements as the engine gets it; 0 = the backend's. On the CPU, 2^18 (1 MiB of fp32): MPI's
// collectives run fastest at about that size (comm/mpi_communicator.h), and the engine's reduction buffers and the
// stage-3 gather ring are sized by the bucket (zero/buffer_plan.h). configs/tiny_cpu.yaml at 2 ranks against 2^24:
// 1.24x tokens/s at stage 2 and 1.97x at stage 3, peak RSS 413 -> 227 and 469 -> 208 MiB; a 90M-parameter model
// 1.14-1.18x, 292-396 MiB less (bench/results/cpu_buckets.txt). On CUDA, the engine's default (2^24): NCCL wants
// large messages.
inline constexpr int64_t kCpuBucketElements = int64_t(1) << 18;
size_t bucket_elements_for(const Config& cfg);

// zero.accum_dtype as the engine gets it. auto: fp32, except where the accumulator sums nothing (one rank,
// one micro-step per step, and no token budget, which varies the micro-steps): there it only holds the
// gradient the model produced in the parameters' dtype, and that dtype holds it bit for bit (a 4B model
// on one GPU: 7.5 GiB less).
DType accum_dtype_for(const Config& cfg, int world, int64_t accum_steps);

// zero.shard_ranks resolved at `world` ranks: the ranks of a shard group (the engine's communicator, and the world
// its partition and buffers are sized for); `world` without hybrid sharding. ConfigError naming the key when it
// does not divide the world.
int shard_group_ranks(const Config& cfg, int world);
// zero.shard_ranks: node, resolved for ranks placed in blocks of `node_ranks` consecutive ranks a node
// (node_block_ranks in comm/hybrid_groups.h for a launch; a plan's ranks per node): the shard groups are the
// nodes. ConfigError when node is asked and `node_ranks` is 0 (the launch's ranks are not in equal blocks).
// Any other value is left as it is. Every command calls it before shard_group_ranks.
void resolve_shard_ranks(Config& cfg, int node_ranks);
// A launch's warning, "" when there is none: hybrid sharding whose shard groups hold ranks of more than one node
// (placed round-robin, or a group larger than a node), so their traffic crosses the network. node_of_rank as in
// LaunchInfo.
std::string shard_placement_warning(const Config& cfg, const std::vector<int>& node_of_rank);
// "stage 3", and under hybrid sharding "stage 3 in shard groups of 8 ranks, replicated 2x (zero.shard_ranks)".
std::string stage_text(const Config& cfg, int world);

// The batch at `world` ranks: the batch contract (zero::resolve_batch). A pinned batch.world other than
// `world` keeps the global batch and derives accum (ConfigError when global, micro and accum are all
// fixed). With batch.micro_tokens, `micro` is the pairs a budget of max_len-token answers holds (what eval
// and the memory plan use) and accum 1 (the sampler varies it per step).
ResolvedBatch run_batch(const Config& cfg, int world);

}  // namespace zero::pmtrain
