// Memory plan per rank before anything is allocated: model state by the ZeRO formulas of the engine's
// real layout (zero::plan_buffers: padding and buckets included), the activations of one micro-batch as
// the model allocates them (model::plan_activations) for the backend's dtypes, and the runtime's own
// share (the process baseline on the CPU, the CUDA context and caching-pool slack on a GPU), against what
// a node offers. A run that cannot fit stops here with a clear message, not in an allocator.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/activation_plan.h"
#include "model/qwen3_config.h"
#include "pmtrain/device_memory.h"
#include "pmtrain/config.h"
#include "zero/partition.h"

namespace zero::pmtrain {

// What the runtime holds besides the engine's buffers and the activations. On the CPU: the executable
// and its shared libraries as loaded, measured in this process (~7 MiB: the CUDA backend's cuBLAS,
// cuBLASLt and NCCL, ~220 MiB, are loaded only for backend cuda, pmtrain/cuda_backend_loader.h), plus
// Open MPI, the tokenizer and the tokenized dataset: 65 MiB (bench/planner/accuracy.sh: a 1-layer hidden-32 model's
// peak RSS less its planned bytes was 72 MiB for the CPU-only build); a profile's
// process_baseline_bytes overrides the sum. Assumed for a GPU: the CUDA context with
// cuBLASLt and NCCL loaded ~1 GiB, and 5% of the device memory in use left unusable by the caching
// pool's rounding and fragmentation.
inline constexpr size_t kCpuRuntimeBeyondStartupBytes = size_t(65) << 20;
// This process's resident bytes now plus kCpuRuntimeBeyondStartupBytes.
size_t cpu_process_baseline_bytes();
inline constexpr size_t kCudaContextBytes = size_t(1) << 30;
inline constexpr double kCudaPoolSlack = 0.05;

enum class PlanDevice { Cpu, Gpu };
// Where a run's model, engine buffers and activations live: the GPU for backend cuda, else the host.
PlanDevice model_device(const Config& cfg);

struct MemoryPlan {
  size_t params = 0, grads = 0, optimizer = 0, comm_buffers = 0, gathered = 0, activations = 0;
  size_t runtime = 0;  // CPU: process baseline + host scratch (see plan_rank_memory); GPU: CUDA context + pool slack
  size_t total() const { return params + grads + optimizer + comm_buffers + gathered + activations + runtime; }
  // Where the plan must fit: a node's host memory (ranks_on_node ranks, 90% of it usable), or one GPU
  // (ranks_on_node = the ranks on that GPU; node_bytes = what it offers them; runtime holds its slack).
  PlanDevice device = PlanDevice::Cpu;
  size_t node_bytes = 0;  // what the node (or GPU) offers
  int ranks_on_node = 1;
  std::string where = "this node";  // for describe(): "this node", or the GPU and its free memory
  std::string describe() const;
};

// The host memory an async save's snapshot of one rank's optimizer state takes (12 bytes an element of its
// shards: checkpoint::rank_file_bytes) when the run saves asynchronously; 0 otherwise (a synchronous save or a
// load streams through checkpoint::kRankFileChunkBytes, nothing in proportion to the model).
size_t async_save_snapshot_bytes(const Config& cfg, const Partition& part);

// The dtypes of the activations a backend keeps: fp32 on the CPU; on a GPU bf16 layer activations (fp32
// residual and statistics) in bf16 mode, fp32 throughout in fp32 mode (zero.param_dtype fp32).
model::ActivationDTypes activation_dtypes(const Config& cfg, PlanDevice device);

// The largest micro-batch a step holds, which the activations are planned for: batches of pairs, micro_pairs
// pairs with every sequence at data.max_len; token budgets (batch.micro_tokens), the budget or one pair over
// it (2 x data.max_len), whichever is more, in at most as many sequences as tokens.
struct MicroShape {
  int64_t tokens = 0, seqs = 0;
};
MicroShape largest_micro_batch(const Config& cfg, int64_t micro_pairs);
// The activation bytes of a training step's largest micro-batch on the device (model::plan_activations).
size_t step_activation_bytes(const Config& cfg, const model::Qwen3Config& qc, PlanDevice device, int64_t micro_pairs);

// An evaluation batch per rank (HF's per_device_eval_batch_size): a forward pass keeps no activation for a
// backward, so it holds more pairs than a training micro-batch in the same memory. batch.eval_micro (pairs) or,
// with token budgets, batch.eval_micro_tokens; 0 = the most whose forward pass at data.max_len
// (model::plan_forward_activations) fits in the training step's activations (step_activation_bytes), so the memory
// plan holds for evaluation as it is. Depends on the config alone, not on the world size or stage: training's
// evaluations, `pmtrain eval` and zero.world_invariant cut the same batches. ConfigError for a value that
// does not fit (naming the most that does) or the key of the other batching. Under activation_checkpointing auto
// the config as written (full: the fewest activations), not the mode a run chose for its GPUs.
struct EvalBatch {
  int64_t pairs = 0;   // batches of pairs: pairs per evaluation batch
  int64_t tokens = 0;  // token budgets: tokens per evaluation batch
  std::string describe() const;  // "N pairs" or "N tokens"
};
EvalBatch eval_batch(const Config& cfg, const model::Qwen3Config& qc, PlanDevice device, int64_t micro_pairs);

// One rank's plan at cfg's stage and dtypes, for `world` ranks and micro-batches of micro_pairs pairs at
// data.max_len (the worst case; token budgets: largest_micro_batch), accum_steps of them a step (zero.accum_dtype auto depends on it).
// process_baseline: the CPU rank's resident bytes before the model.
MemoryPlan plan_rank_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                            int world, int64_t micro_pairs, int64_t accum_steps, PlanDevice device,
                            size_t process_baseline = cpu_process_baseline_bytes());
// What each rank holds in this node's host memory, for `train` and --dry-run: on the CPU backend the
// whole plan (plan_rank_memory); on the CUDA backend the process and its host staging only (the model lives on
// the GPU), an offloaded optimizer (zero.offload), and the larger of the init scratch (a piece of a tensor: init_scratch_bytes) and
// an async save's snapshot (async_save_snapshot_bytes).
MemoryPlan plan_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                       int world, int ranks_on_node, int64_t micro_pairs, int64_t accum_steps);
// The CUDA backend's plan per rank (plan_rank_memory on a GPU) against the tightest of the ranks' GPUs, as
// probe_devices found them (index = rank): the one that offers the fewest bytes per rank on it, offering
// its free memory plus the CUDA contexts the plan counts (at most its total). No devices: node_bytes 0
// and where "no GPU probed".
MemoryPlan plan_gpu_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                           int world, int64_t micro_pairs, int64_t accum_steps,
                           const std::vector<DeviceMemory>& devices);
// ranks_on_node x total over what the node offers them: 90% of its host memory, or all a GPU offers.
double node_use(const MemoryPlan& plan);
bool fits_on_node(const MemoryPlan& plan);  // node_use at most 1
// Throws ConfigError with the plan when it does not fit; the advice never names a stage above 3. `world`: the
// run's ranks (under hybrid sharding more of them hold no less each: the advice is larger shard groups).
void require_fits(const MemoryPlan& plan, const Config& cfg, int world);
// The sharding advice of an out-of-memory message, ending in ", " ("" when there is none): a higher zero.stage
// below 3, and under hybrid sharding larger shard groups (each rank holds a shard of its group's, whatever the
// world, so more GPUs do not help there).
std::string sharding_advice(const Config& cfg, int world);
// The activation-checkpointing advice of an out-of-memory message: "" when it is full already, else the
// next modes to try, ending in ", ".
std::string checkpointing_advice(const Config& cfg);

// model.activation_checkpointing: auto, resolved: cfg with the least recompute whose plan uses at most
// kAutoMemoryUse of what the device offers (`use`: node_use of the config's plan): none, then selective,
// then full with the most model.selective_layers within it (a binary search over 0..layers: the plan's peak
// grows with them), then full, else full with model.recompute_attention (the least memory), which the
// caller's require_fits then judges. checkpointing_auto stays set (the resolved config says auto). A config
// without auto comes back as it is.
// The headroom: the plan is an estimate (its peak within 3% of the measured one on an H200,
// bench/results/gpu_20261128_h200) and a caching allocator's fragmentation under changing shapes is not in it;
// a plan with no room to spare runs when the user sets its mode, never by auto's choice.
inline constexpr double kAutoMemoryUse = 0.9;
Config resolve_checkpointing(Config cfg, int64_t layers, const std::function<double(const Config&)>& use);
// batch.micro_tokens: auto, resolved: cfg with the most tokens a micro-batch may hold whose plan uses at most
// kAutoMemoryUse of what the device offers (`use`, as above; the plan grows with the budget: a binary search),
// between token_budget_floor (taken when even it does not fit: the caller's require_fits judges) and the rank's
// whole share of a step at data.max_len, ceil(batch.global / world) pairs (no micro-batch holds more); below that
// share rounded down to a multiple of model::kTokenRowMultiple (a GPU computes rows in those). Resolved after
// activation_checkpointing auto, which chooses at the floor: recompute avoided first, then fewer, larger
// micro-steps (each pays the gradient accumulation's passes and stage 3's gathers). micro_tokens_auto stays set
// (the resolved config says auto). A config without auto comes back as it is.
Config resolve_micro_tokens(Config cfg, int world, const std::function<double(const Config&)>& use);
// Both auto choices in their order (resolve_checkpointing, then resolve_micro_tokens) against one plan's use.
Config resolve_auto_choices(const Config& cfg, int64_t layers, int world,
                            const std::function<double(const Config&)>& use);
// A config's checkpointing in words: "none", "selective", "full", "full, the last 12 of 28 layers selective"
// (layers 0: "of 28" left out), "full, attention recomputed", after "auto: " when auto chose it.
std::string checkpointing_text(const ModelSection& m, int64_t layers = 0);

size_t host_memory_bytes();

}  // namespace zero::pmtrain
