#include "pmtrain/planner.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "checkpoint/shard_layout.h"
#include "core/check.h"
#include "core/process_memory.h"
#include "core/dtype.h"
#include "model/activation_plan.h"
#include "model/init.h"
#include "model/token_plan.h"
#include "pmtrain/engine_assembly.h"
#include "zero/buffer_plan.h"

namespace zero::pmtrain {

size_t cpu_process_baseline_bytes() { return resident_bytes() + kCpuRuntimeBeyondStartupBytes; }

size_t host_memory_bytes() { return size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGE_SIZE)); }

namespace {
size_t largest_tensor_elements(const std::vector<GroupInfo>& groups) {
  size_t largest = 0;
  for (const GroupInfo& g : groups)
    for (const TensorInfo& t : g.tensors) largest = std::max(largest, t.numel);
  return largest;
}

// Initialisation's host scratch: one piece of a tensor (model::kInitPieceElements, pmtrain/model_setup.cpp) in
// fp32, and under HF import also that piece's bytes as read from the file (at most 8 a value). Never a whole
// tensor, whatever the model's size.
size_t init_scratch_bytes(const Config& cfg, const std::vector<GroupInfo>& groups) {
  const size_t piece = std::min(largest_tensor_elements(groups), model::kInitPieceElements);
  return piece * (sizeof(float) + (cfg.model.hf_dir.empty() ? 0 : 8));
}

// One rank's engine buffers by the engine's own arithmetic (the schedule does not change sizes): sharded over
// the shard group (all ranks without hybrid sharding), with the replicas' chunks under hybrid sharding, as the
// engine is.
struct RankBuffers {
  EngineConfig ec;
  Partition part;
  BufferPlan plan;
};
RankBuffers rank_buffers(const Config& cfg, const std::vector<GroupInfo>& groups, int world, int64_t accum_steps) {
  RankBuffers r;
  r.ec = engine_config(cfg, world, accum_steps, 1);
  const int S = shard_group_ranks(cfg, world);
  r.part = make_partition(groups, S, r.ec.bucket_elements);
  r.plan = plan_buffers(r.ec, r.part, world / S);
  return r;
}
}  // namespace

size_t async_save_snapshot_bytes(const Config& cfg, const Partition& part) {
  // A synchronous save, and every load, streams the state through kRankFileChunkBytes (or writes host
  // arrays in place); an async save copies the whole rank file into host memory and trains on meanwhile.
  const bool saves = cfg.run.save_final || cfg.run.save_every > 0;
  return cfg.run.async_save && saves ? size_t(checkpoint::rank_file_bytes(part)) : 0;
}

PlanDevice model_device(const Config& cfg) { return cfg.backend == Backend::Cuda ? PlanDevice::Gpu : PlanDevice::Cpu; }

model::ActivationDTypes activation_dtypes(const Config& cfg, PlanDevice device) {
  return device == PlanDevice::Gpu && cfg.zero.param_dtype == DType::BF16 ? model::kGpuActivations
                                                                          : model::kCpuActivations;
}

namespace {
// Token rows of `tokens` tokens on the device (ModelOps::token_rows): the CPU computes the real tokens, a GPU
// rounds them up to its GEMM tiles.
int64_t device_rows(int64_t tokens, PlanDevice device) {
  return device == PlanDevice::Cpu ? tokens : model::padded_token_rows(tokens);
}

// The largest batch of n pairs, every sequence at data.max_len; with token budgets (batch.micro_tokens) of
// n tokens, or one pair over them (2 x data.max_len), in at most as many sequences as tokens.
MicroShape batch_shape(const Config& cfg, int64_t n) {
  if (cfg.batch.micro_tokens > 0) {
    const int64_t tokens = std::max(n, token_budget_floor(cfg.data));
    return {tokens, tokens};
  }
  return {2 * n * cfg.data.max_len, 2 * n};
}
}  // namespace

MicroShape largest_micro_batch(const Config& cfg, int64_t micro_pairs) {
  return batch_shape(cfg, cfg.batch.micro_tokens > 0 ? cfg.batch.micro_tokens : micro_pairs);
}

size_t step_activation_bytes(const Config& cfg, const model::Qwen3Config& qc, PlanDevice device, int64_t micro_pairs) {
  const MicroShape s = largest_micro_batch(cfg, micro_pairs);
  return model::plan_activations(qc, device_rows(s.tokens, device), s.seqs, cfg.model.activation_checkpointing,
                                 activation_dtypes(cfg, device), cfg.model.selective_layers,
                                 cfg.model.recompute_attention)
      .peak;
}

EvalBatch eval_batch(const Config& cfg, const model::Qwen3Config& qc, PlanDevice device, int64_t micro_pairs) {
  const bool by_tokens = cfg.batch.micro_tokens > 0;
  ZERO_REQUIRE(by_tokens || cfg.batch.eval_micro_tokens == 0, ConfigError,
               "{}: batch.eval_micro_tokens is for token budgets (batch.micro_tokens); with batches of pairs set "
               "batch.eval_micro",
               cfg.source);
  ZERO_REQUIRE(!by_tokens || cfg.batch.eval_micro == 0, ConfigError,
               "{}: batch.eval_micro is for batches of pairs; with batch.micro_tokens set batch.eval_micro_tokens",
               cfg.source);
  const size_t room = step_activation_bytes(cfg, qc, device, micro_pairs);
  // A forward pass of n pairs (or n tokens) at its worst (batch_shape).
  auto need = [&](int64_t n) {
    const MicroShape s = batch_shape(cfg, n);
    return model::plan_forward_activations(qc, device_rows(s.tokens, device), s.seqs, activation_dtypes(cfg, device));
  };
  // The training micro-batch's forward always fits (a forward keeps less than a step); the most that fits,
  // by doubling and then bisecting (need grows with n).
  int64_t most = by_tokens ? cfg.batch.micro_tokens : std::max<int64_t>(1, micro_pairs);
  while (most < (int64_t(1) << 40) && need(2 * most) <= room) most *= 2;
  for (int64_t step = most / 2; step > 0; step /= 2)  // the answer is in [most, 2 most)
    if (need(most + step) <= room) most += step;
  const int64_t asked = by_tokens ? cfg.batch.eval_micro_tokens : cfg.batch.eval_micro;
  const char* key = by_tokens ? "batch.eval_micro_tokens" : "batch.eval_micro";
  ZERO_REQUIRE(asked <= most, ConfigError,
               "{}: {} {}: a forward pass of {} {} needs {:.2f} GiB of activations, more than the {:.2f} GiB the "
               "training micro-batch is planned for; at most {} fit (0 = that many)",
               cfg.source, key, asked, asked, by_tokens ? "tokens" : fmt::format("pairs at data.max_len {}", cfg.data.max_len),
               double(need(asked)) / double(1ull << 30), double(room) / double(1ull << 30), most);
  const int64_t n = asked > 0 ? asked : most;
  return by_tokens ? EvalBatch{0, n} : EvalBatch{n, 0};
}

std::string EvalBatch::describe() const {
  return tokens > 0 ? fmt::format("{} tokens", tokens) : fmt::format("{} pair{}", pairs, pairs == 1 ? "" : "s");
}

MemoryPlan plan_rank_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                            int world, int64_t micro_pairs, int64_t accum_steps, PlanDevice device,
                            size_t process_baseline) {
  const RankBuffers rb = rank_buffers(cfg, groups, world, accum_steps);
  const EngineConfig& ec = rb.ec;
  const Partition& part = rb.part;
  const BufferPlan& b = rb.plan;
  MemoryPlan m;
  m.params = b.bytes(MemCategory::Params);
  m.grads = b.bytes(MemCategory::Grads);
  m.optimizer = b.bytes(MemCategory::Master) + b.bytes(MemCategory::OptimM) + b.bytes(MemCategory::OptimV);
  m.comm_buffers = b.bytes(MemCategory::CommBuffers) + b.bytes(MemCategory::Other);
  m.gathered = b.bytes(MemCategory::Gathered);
  if (device == PlanDevice::Gpu && b.offload) {  // zero.offload: the optimizer and its staging are host memory
    m.optimizer = 0;
    m.comm_buffers -= b.offload_staging_bytes();
  }
  // Activations as the model allocates them for the largest micro-batch (fp32 token rows on the CPU; the GPU
  // path's bf16 activations with rows rounded up to its GEMM tiles); on a GPU with the largest device scratch
  // an op takes beside them from the same pool (norm partials, attention workspace, a converted GEMM operand).
  m.activations = step_activation_bytes(cfg, qc, device, micro_pairs);
  if (device == PlanDevice::Gpu) {
    const MicroShape s = largest_micro_batch(cfg, micro_pairs);
    m.activations += model::gpu_op_scratch_bytes(qc, s.tokens, s.seqs, activation_dtypes(cfg, device).activations);
  }
  if (device == PlanDevice::Cpu) {
    // Besides the activations, the larger of an op's own scratch (during a step) and the initialisation's
    // host scratch (init_scratch_bytes, before any activation exists).
    const size_t init_scratch = init_scratch_bytes(cfg, groups);
    const size_t op_scratch = model::cpu_op_scratch_bytes(qc, cfg.data.max_len, ec.param_dtype == DType::BF16);
    m.runtime = process_baseline + std::max(op_scratch, init_scratch > m.activations ? init_scratch - m.activations : 0);
    // An async save's snapshot lives beside the optimizer while the steps go on.
    m.optimizer += async_save_snapshot_bytes(cfg, part);
  } else {
    const size_t used = m.params + m.grads + m.optimizer + m.comm_buffers + m.gathered + m.activations;
    m.runtime = kCudaContextBytes + size_t(kCudaPoolSlack * double(used));
  }
  m.device = device;
  m.ranks_on_node = 1;
  return m;
}

MemoryPlan plan_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                       int world, int ranks_on_node, int64_t micro_pairs, int64_t accum_steps) {
  MemoryPlan m;
  if (model_device(cfg) == PlanDevice::Gpu) {
    // The model, the engine and the activations live on the GPU (plan_gpu_memory); the host holds the
    // process, an offloaded optimizer (zero.offload), and one at a time a piece of a tensor being initialised
    // or an async save's snapshot of the optimizer state.
    const size_t init_scratch = init_scratch_bytes(cfg, groups);
    // zero.offload: the optimizer, resident (master, m, v and the transfer staging: buffer_plan's host_bytes).
    const RankBuffers rb = rank_buffers(cfg, groups, world, accum_steps);
    const size_t offloaded = rb.plan.host_bytes();
    const size_t snapshot = async_save_snapshot_bytes(cfg, rb.part);
    // Named as what it holds: the optimizer's copy, or the runtime's scratch.
    m.optimizer = offloaded + (snapshot > init_scratch ? snapshot : 0);
    m.runtime = cpu_process_baseline_bytes() + (snapshot > init_scratch ? 0 : init_scratch);
  } else {
    m = plan_rank_memory(cfg, qc, groups, world, micro_pairs, accum_steps, PlanDevice::Cpu);
  }
  m.node_bytes = host_memory_bytes();
  m.ranks_on_node = ranks_on_node;
  return m;
}

MemoryPlan plan_gpu_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                           int world, int64_t micro_pairs, int64_t accum_steps, const std::vector<DeviceMemory>& devices) {
  MemoryPlan m = plan_rank_memory(cfg, qc, groups, world, micro_pairs, accum_steps, PlanDevice::Gpu);
  m.node_bytes = 0;
  m.where = "no GPU probed";
  // What a GPU offers its ranks: its free memory, plus the CUDA contexts that free memory already lost and
  // each rank's plan counts again (kCudaContextBytes in runtime), never more than the device holds.
  auto offered = [](const DeviceMemory& d) {
    return std::min(d.total_bytes, d.free_bytes + size_t(d.ranks_on_device) * kCudaContextBytes);
  };
  const DeviceMemory* tightest = nullptr;
  for (const DeviceMemory& d : devices)
    if (!tightest || double(offered(d)) / d.ranks_on_device < double(offered(*tightest)) / tightest->ranks_on_device)
      tightest = &d;
  if (tightest) {
    const DeviceMemory& d = *tightest;
    auto gib = [](size_t b) { return double(b) / double(1ull << 30); };
    m.node_bytes = offered(d);
    m.ranks_on_node = d.ranks_on_device;
    m.where = fmt::format("GPU {} of rank {} ({}: {:.2f} GiB, {:.2f} GiB free)", d.device, d.rank, d.name,
                          gib(d.total_bytes), gib(d.free_bytes));
  }
  return m;
}

std::string MemoryPlan::describe() const {
  auto gib = [](size_t b) { return double(b) / double(1ull << 30); };
  const std::string parts = fmt::format(
      "per rank{}: params {:.2f} GiB, grads {:.2f} GiB, optimizer {:.2f} GiB, comm buffers {:.2f} GiB, gathered "
      "{:.2f} GiB, activations {:.2f} GiB, runtime {:.2f} GiB = {:.2f} GiB",
      device == PlanDevice::Gpu ? " on its GPU" : "", gib(params), gib(grads), gib(optimizer), gib(comm_buffers),
      gib(gathered), gib(activations), gib(runtime), gib(total()));
  if (device == PlanDevice::Gpu && node_bytes == 0) return parts;  // no device to hold it against
  return fmt::format("{}; {} ranks on {} need {:.2f} GiB of {:.2f} GiB", parts, ranks_on_node, where,
                     gib(total() * size_t(ranks_on_node)), gib(node_bytes));
}

namespace {
// A GPU plan carries its own slack (kCudaPoolSlack); host memory keeps a tenth for everything else.
size_t usable_bytes(const MemoryPlan& plan) {
  return plan.device == PlanDevice::Gpu ? plan.node_bytes : plan.node_bytes / 10 * 9;
}
size_t needed_bytes(const MemoryPlan& plan) { return plan.total() * size_t(plan.ranks_on_node); }
}  // namespace
double node_use(const MemoryPlan& plan) {
  const size_t usable = usable_bytes(plan);
  return usable > 0 ? double(needed_bytes(plan)) / double(usable) : INFINITY;
}
bool fits_on_node(const MemoryPlan& plan) { return needed_bytes(plan) <= usable_bytes(plan); }

std::string checkpointing_advice(const Config& cfg) {
  // auto chose the least recompute within its headroom; an out-of-memory past that asks for the most.
  const ModelSection& m = cfg.model;
  const bool least = m.activation_checkpointing == model::ActivationCheckpointing::Full && m.selective_layers == 0 &&
                     m.recompute_attention;
  if (m.checkpointing_auto && !least)
    return "model.activation_checkpointing: full with model.recompute_attention: true (" + checkpointing_text(m) + "), ";
  switch (m.activation_checkpointing) {
    case model::ActivationCheckpointing::None: return "model.activation_checkpointing: selective or full, ";
    case model::ActivationCheckpointing::Selective: return "model.activation_checkpointing: full, ";
    case model::ActivationCheckpointing::Full: break;
  }
  if (m.selective_layers > 0) return "model.selective_layers: 0, ";
  return m.recompute_attention ? "" : "model.recompute_attention: true, ";
}

Config resolve_checkpointing(Config cfg, int64_t layers, const std::function<double(const Config&)>& use) {
  if (!cfg.model.checkpointing_auto) return cfg;
  using model::ActivationCheckpointing;
  auto fits = [&](const Config& c) { return use(c) <= kAutoMemoryUse; };
  auto with = [&](ActivationCheckpointing mode, int64_t selective, bool recompute_attention = false) {
    Config c = cfg;
    c.model.activation_checkpointing = mode;
    c.model.selective_layers = selective;
    c.model.recompute_attention = recompute_attention;
    return c;
  };
  if (Config none = with(ActivationCheckpointing::None, 0); fits(none)) return none;
  if (Config selective = with(ActivationCheckpointing::Selective, 0); fits(selective)) return selective;
  int64_t lo = 0, hi = layers - 1;  // the most selective layers under full that fit: in [lo, hi] (0 if none does)
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (fits(with(ActivationCheckpointing::Full, mid))) lo = mid;
    else hi = mid - 1;
  }
  if (Config full = with(ActivationCheckpointing::Full, lo); lo > 0 || fits(full)) return full;
  return with(ActivationCheckpointing::Full, 0, true);
}

Config resolve_micro_tokens(Config cfg, int world, const std::function<double(const Config&)>& use) {
  if (!cfg.batch.micro_tokens_auto) return cfg;
  const int64_t floor = token_budget_floor(cfg.data);
  const int64_t share = (cfg.batch.global + world - 1) / std::max(1, world);
  auto fits = [&](int64_t tokens) {
    cfg.batch.micro_tokens = tokens;
    return use(cfg) <= kAutoMemoryUse;
  };
  const int64_t whole = std::max(floor, share * floor);
  if (fits(whole)) {
    cfg.batch.micro_tokens = whole;
    return cfg;
  }
  int64_t lo = floor, hi = whole;  // the most that fits: lo, or in (lo, hi); fits(hi) is false
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  cfg.batch.micro_tokens = std::max(floor, lo / model::kTokenRowMultiple * model::kTokenRowMultiple);
  return cfg;
}

Config resolve_auto_choices(const Config& cfg, int64_t layers, int world,
                            const std::function<double(const Config&)>& use) {
  return resolve_micro_tokens(resolve_checkpointing(cfg, layers, use), world, use);
}

std::string checkpointing_text(const ModelSection& m, int64_t layers) {
  std::string mode = checkpointing_name(m.activation_checkpointing);
  if (m.activation_checkpointing == model::ActivationCheckpointing::Full && m.selective_layers > 0)
    mode += layers > 0 ? fmt::format(", the last {} of {} layers selective", m.selective_layers, layers)
                       : fmt::format(", the last {} layers selective", m.selective_layers);
  if (m.activation_checkpointing == model::ActivationCheckpointing::Full && m.recompute_attention)
    mode += ", attention recomputed";
  return m.checkpointing_auto ? "auto: " + mode : mode;
}

std::string sharding_advice(const Config& cfg, int world) {
  std::string advice = cfg.zero.stage < 3 ? "a higher zero.stage, " : "";
  const int S = shard_group_ranks(cfg, world);
  if (S < world)
    advice += fmt::format("larger shard groups (zero.shard_ranks {}: each rank holds 1/{} of the state however many "
                          "ranks run; 0 = over all {}), ",
                          S, S, world);
  return advice;
}

void require_fits(const MemoryPlan& plan, const Config& cfg, int world) {
  if (fits_on_node(plan)) return;
  const std::string higher = sharding_advice(cfg, world);
  const std::string ckpt = checkpointing_advice(cfg);
  const bool hybrid = shard_group_ranks(cfg, world) < world;  // more GPUs hold no less each
  if (plan.device == PlanDevice::Gpu)
    throw ConfigError(fmt::format(
        "{}: the GPU cannot hold the run: {}. Use {}{}a smaller batch.micro (or batch.micro_tokens){} "
        "(`pmtrain plan {} --gpu-mem 80GiB --world 8,16` compares them).",
        cfg.source, plan.describe(), higher, ckpt, hybrid ? "" : ", or more GPUs", cfg.source));
  if (model_device(cfg) == PlanDevice::Gpu)  // the host's share of a GPU run: the process, an offloaded optimizer, a snapshot
    throw ConfigError(fmt::format(
        "{}: this machine cannot hold the run's host memory: {}. Use fewer ranks on this node, {}{}{}or more nodes",
        cfg.source, plan.describe(), higher,
        cfg.zero.offload_optimizer ? "the optimizer on the GPU (zero.offload: none), " : "",
        cfg.run.async_save ? "synchronous saves (run.async_save false: an async save copies each rank's optimizer "
                             "state into host memory), "
                           : ""));
  throw ConfigError(fmt::format(
             "{}: this machine cannot hold the run: {}. Use more nodes, {}{}a smaller batch.micro, or the cuda "
             "backend on GPUs with enough memory (`pmtrain plan {} --gpu-mem 24GiB,80GiB` compares them).",
             cfg.source, plan.describe(), higher, ckpt, cfg.source));
}

}  // namespace zero::pmtrain
