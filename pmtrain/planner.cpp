#include "pmtrain/planner.h"

#include <unistd.h>

#include <algorithm>

#include "core/check.h"
#include "core/dtype.h"

namespace zero::pmtrain {

size_t host_memory_bytes() { return size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGE_SIZE)); }

MemoryPlan plan_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                       int world, int ranks_on_node, int64_t micro_pairs) {
  const Partition p = make_partition(groups, world, size_t(cfg.zero.bucket_elements));
  const size_t pb = dtype_size(parse_dtype(cfg.zero.param_dtype, "zero.param_dtype"));
  const size_t ab = dtype_size(parse_dtype(cfg.zero.accum_dtype, "zero.accum_dtype"));
  const size_t rb = dtype_size(parse_dtype(cfg.zero.reduce_dtype, "zero.reduce_dtype"));
  const int stage = int(cfg.zero.stage);
  MemoryPlan m;
  m.params = pb * (stage == 3 ? p.total_shard : p.total_padded);
  m.grads = ab * (stage >= 2 ? p.total_shard : p.total_padded);
  m.optimizer = 12 * (stage == 0 ? p.total_padded : p.total_shard);
  // Two bucket slots of grad views, and two reduction chunks (send + receive), as the engine allocates.
  const size_t chunk = std::min(p.max_bucket_padded / world, std::max<size_t>(1, size_t(cfg.zero.bucket_elements) / world));
  m.comm_buffers = 2 * p.max_bucket_padded * pb + 2 * chunk * size_t(world) * rb + 2 * chunk * rb;
  if (stage == 3) m.gathered = size_t(cfg.zero.prefetch_depth + 1) * p.max_group_padded * pb;
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
