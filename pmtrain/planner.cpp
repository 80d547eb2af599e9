#include "pmtrain/planner.h"

#include <unistd.h>

#include <algorithm>

#include "core/check.h"
#include "core/dtype.h"
#include "pmtrain/engine_assembly.h"
#include "zero/buffer_plan.h"

namespace zero::pmtrain {

size_t host_memory_bytes() { return size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGE_SIZE)); }

MemoryPlan plan_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                       int world, int ranks_on_node, int64_t micro_pairs) {
  // The engine's buffers by the engine's own arithmetic (accumulation and schedule do not change sizes).
  const EngineConfig ec = engine_config(cfg, 1, 1);
  const BufferPlan b = plan_buffers(ec, make_partition(groups, world, ec.bucket_elements));
  MemoryPlan m;
  m.params = b.bytes(MemCategory::Params);
  m.grads = b.bytes(MemCategory::Grads);
  m.optimizer = b.bytes(MemCategory::Master) + b.bytes(MemCategory::OptimM) + b.bytes(MemCategory::OptimV);
  m.comm_buffers = b.bytes(MemCategory::CommBuffers) + b.bytes(MemCategory::Other);
  m.gathered = b.bytes(MemCategory::Gathered);
  // Activations (fp32 on the CPU backend): tokens of a micro-batch at the worst case (every sequence
  // at max_len); per layer and token the kept tensors of a pre-norm block (about 8 x hidden + 4 x
  // intermediate + q/k/v widths) plus the attention's log-sum-exp per head (backward recomputes the
  // probabilities, one sequence and head at a time).
  const double T = double(micro_pairs) * 2 * double(cfg.data.max_len);
  const double per_tok_layer = 8.0 * qc.hidden_size + 4.0 * qc.intermediate_size + 2.0 * qc.q_dim() + 2.0 * qc.kv_dim() +
                               double(qc.num_heads);
  const double layers_kept = cfg.model.activation_checkpointing ? 1.0 : double(qc.num_layers);
  const double inputs_kept = cfg.model.activation_checkpointing ? double(qc.num_layers) * qc.hidden_size : 0.0;
  m.activations = size_t(4.0 * T * (per_tok_layer * layers_kept + inputs_kept));
  m.node_bytes = host_memory_bytes();
  m.ranks_on_node = ranks_on_node;
  return m;
}

std::string MemoryPlan::describe() const {
  auto gib = [](size_t b) { return double(b) / double(1ull << 30); };
  return fmt::format(
      "per rank: params {:.2f} GiB, grads {:.2f} GiB, optimizer {:.2f} GiB, comm buffers {:.2f} GiB, gathered "
      "{:.2f} GiB, activations ~{:.2f} GiB = {:.2f} GiB; {} ranks on this node need {:.2f} GiB of {:.2f} GiB",
      gib(params), gib(grads), gib(optimizer), gib(comm_buffers), gib(gathered), gib(activations), gib(total()),
      ranks_on_node, gib(total() * size_t(ranks_on_node)), gib(node_bytes));
}

void require_fits(const MemoryPlan& plan, const std::string& config_path) {
  const size_t need = plan.total() * size_t(plan.ranks_on_node);
  ZERO_REQUIRE(need <= plan.node_bytes * 9 / 10, ConfigError,
               "{}: this machine cannot hold the run: {}. Use more nodes, a higher zero.stage, activation "
               "checkpointing or a smaller batch.micro, or the cuda backend on GPUs with enough memory.",
               config_path, plan.describe());
}

}  // namespace zero::pmtrain
