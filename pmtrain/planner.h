// Memory plan per rank before anything is allocated: model state by the ZeRO formulas of the engine's
// real layout (padding and buckets included), plus an activation estimate for one micro-batch, against
// what this node has. A run that cannot fit stops here with a clear message, not in an allocator.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/qwen3_config.h"
#include "pmtrain/config.h"
#include "zero/partition.h"

namespace zero::pmtrain {

struct MemoryPlan {
  size_t params = 0, grads = 0, optimizer = 0, comm_buffers = 0, gathered = 0, activations = 0;
  size_t total() const { return params + grads + optimizer + comm_buffers + gathered + activations; }
  size_t node_bytes = 0;       // what the node offers (host memory for the CPU backend)
  int ranks_on_node = 1;
  std::string describe() const;
};

MemoryPlan plan_memory(const Config& cfg, const model::Qwen3Config& qc, const std::vector<GroupInfo>& groups,
                       int world, int ranks_on_node, int64_t micro_pairs);
// Throws ConfigError with the plan when ranks_on_node x total exceeds the node's memory.
void require_fits(const MemoryPlan& plan, const std::string& config_path);

size_t host_memory_bytes();

}  // namespace zero::pmtrain
