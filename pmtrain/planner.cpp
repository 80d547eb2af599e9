#include "pmtrain/planner.h"

#include <unistd.h>

#include <algorithm>

#include "core/check.h"
#include "core/process_memory.h"
#include "core/dtype.h"
#include "model/activation_plan.h"
#include "model/token_plan.h"
#include "pmtrain/engine_assembly.h"
#include "zero/buffer_plan.h"

namespace zero::pmtrain {

size_t cpu_process_baseline_bytes() { return resident_bytes() + kCpuRuntimeBeyondStartupBytes; }

size_t host_memory_bytes() { return size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGE_SIZE)); }

MemoryPlan plan_rank_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                            int world, int64_t micro_pairs, int64_t accum_steps, PlanDevice device,
                            size_t process_baseline) {
  // The engine's buffers by the engine's own arithmetic (the schedule does not change sizes).
  const EngineConfig ec = engine_config(cfg, world, accum_steps, 1);
  const BufferPlan b = plan_buffers(ec, make_partition(groups, world, ec.bucket_elements));
  MemoryPlan m;
  m.params = b.bytes(MemCategory::Params);
  m.grads = b.bytes(MemCategory::Grads);
  m.optimizer = b.bytes(MemCategory::Master) + b.bytes(MemCategory::OptimM) + b.bytes(MemCategory::OptimV);
  m.comm_buffers = b.bytes(MemCategory::CommBuffers) + b.bytes(MemCategory::Other);
  m.gathered = b.bytes(MemCategory::Gathered);
  // Activations as the model allocates them, every sequence at max_len (the worst case of a micro-batch):
  // fp32 token rows on the CPU; the GPU path's bf16 arena with rows rounded up to its GEMM tiles.
  const int64_t seqs = 2 * micro_pairs, tokens = seqs * cfg.data.max_len;
  const model::ActivationCheckpointing ckpt = cfg.model.activation_checkpointing;
  if (device == PlanDevice::Cpu) {
    m.activations = model::plan_activations(qc, tokens, seqs, ckpt, model::kCpuActivations, cfg.model.selective_layers).peak;
    // Besides the activations, the larger of an op's own scratch (during a step) and the engine's
    // init_params host scratch (one whole tensor in fp32, the embedding, before any activation exists).
    size_t largest = 0;
    for (const GroupInfo& g : groups)
      for (const TensorInfo& t : g.tensors) largest = std::max(largest, t.numel);
    const size_t init_scratch = 4 * largest;
    const size_t op_scratch = model::cpu_op_scratch_bytes(qc, cfg.data.max_len, ec.param_dtype == DType::BF16);
    m.runtime = process_baseline + std::max(op_scratch, init_scratch > m.activations ? init_scratch - m.activations : 0);
  } else {
    const int64_t rows = (tokens + model::kTokenRowMultiple - 1) / model::kTokenRowMultiple * model::kTokenRowMultiple;
    m.activations = model::plan_activations(qc, rows, seqs, ckpt, model::kGpuActivations, cfg.model.selective_layers).peak;
    const size_t used = m.params + m.grads + m.optimizer + m.comm_buffers + m.gathered + m.activations;
    m.runtime = kCudaContextBytes + size_t(kCudaPoolSlack * double(used));
  }
  m.ranks_on_node = 1;
  return m;
}

MemoryPlan plan_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                       int world, int ranks_on_node, int64_t micro_pairs, int64_t accum_steps) {
  // The host's share only: on the CUDA backend the host holds the process, not the model (GPU memory
  // is `pmtrain plan`'s question).
  MemoryPlan m = plan_rank_memory(cfg, qc, groups, world, micro_pairs, accum_steps, PlanDevice::Cpu);
  m.node_bytes = host_memory_bytes();
  m.ranks_on_node = ranks_on_node;
  return m;
}

std::string MemoryPlan::describe() const {
  auto gib = [](size_t b) { return double(b) / double(1ull << 30); };
  return fmt::format(
      "per rank: params {:.2f} GiB, grads {:.2f} GiB, optimizer {:.2f} GiB, comm buffers {:.2f} GiB, gathered "
      "{:.2f} GiB, activations {:.2f} GiB, runtime {:.2f} GiB = {:.2f} GiB; {} ranks on this node need {:.2f} GiB "
      "of {:.2f} GiB",
      gib(params), gib(grads), gib(optimizer), gib(comm_buffers), gib(gathered), gib(activations), gib(runtime),
      gib(total()), ranks_on_node, gib(total() * size_t(ranks_on_node)), gib(node_bytes));
}

bool fits_on_node(const MemoryPlan& plan) {
  return plan.total() * size_t(plan.ranks_on_node) <= plan.node_bytes / 10 * 9;
}

std::string checkpointing_advice(const Config& cfg) {
  switch (cfg.model.activation_checkpointing) {
    case model::ActivationCheckpointing::None: return "model.activation_checkpointing: selective or full, ";
    case model::ActivationCheckpointing::Selective: return "model.activation_checkpointing: full, ";
    case model::ActivationCheckpointing::Full: break;
  }
  return "";
}

void require_fits(const MemoryPlan& plan, const Config& cfg) {
  if (fits_on_node(plan)) return;
  const std::string higher = cfg.zero.stage < 3 ? "a higher zero.stage, " : "";
  const std::string ckpt = checkpointing_advice(cfg);
  throw ConfigError(fmt::format(
             "{}: this machine cannot hold the run: {}. Use more nodes, {}{}a smaller batch.micro, or the cuda "
             "backend on GPUs with enough memory (`pmtrain plan {} --gpu-mem 24GiB,80GiB` compares them).",
             cfg.source, plan.describe(), higher, ckpt, cfg.source));
}

}  // namespace zero::pmtrain
