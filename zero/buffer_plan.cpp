#include "zero/buffer_plan.h"

#include <algorithm>

namespace zero {

BufferPlan plan_buffers(const EngineConfig& cfg, const Partition& part, int replicas) {
  BufferPlan b;
  const size_t W = size_t(part.world);
  b.world = part.world;
  b.param_dtype = cfg.param_dtype;
  b.accum_dtype = cfg.accum_dtype;
  b.reduce_dtype = cfg.reduce_dtype;
  b.split_master = cfg.split_master;
  b.master_in_params = master_in_params(cfg);
  b.offload = cfg.offload_optimizer;
  b.params = cfg.stage == 3 ? part.total_shard : part.total_padded;
  b.accum = cfg.stage >= 2 ? part.total_shard : part.total_padded;
  b.optimizer = cfg.stage == 0 ? part.total_padded : part.total_shard;
  b.staging = part.max_staged;
  if (b.offload) b.offload_chunk = std::min(b.optimizer, cfg.offload_chunk);
  // Chunks never exceed a bucket, so a group larger than a bucket needs no full-size send buffer; but a
  // split group's piece goes out whole, and a piece is at least kShardAlign a rank.
  b.chunk = std::max(std::min(part.max_bucket_padded / W, std::max<size_t>(1, cfg.bucket_elements / W)), part.max_piece);
  b.reduction_buffers = !reductions_in_place(cfg, part);
  if (cfg.stage == 3 && !gathers_in_place(part)) {
    b.ring_slots = size_t(cfg.prefetch_depth) + 1;
    b.ring_slot = part.max_unit_padded;
  }
  // The replicas' chunks: a rank's reduction chunk at stages 2-3 (what each completed reduce-scatter hands on),
  // the group's whole chunk at stages 0-1 (their buckets cross as all-reduces of the full accumulator).
  if (replica_reduction_buffered(cfg, replicas)) b.replica_chunk = cfg.stage >= 2 ? b.chunk : b.chunk * W;
  size_t tensors = 0;
  for (const GroupLayout& g : part.groups) tensors += g.tensor_offsets.size();
  // Fixed-point sums add their exact sum of squares (math::FixedSquareSum, 3 words) after the counts.
  b.partials = 1 + tensors + (cfg.accum_dtype == DType::FX64 ? kFixedSquareWords : 0);
  return b;
}

size_t BufferPlan::bytes(MemCategory c) const {
  const size_t p = dtype_size(param_dtype), a = dtype_size(accum_dtype), r = dtype_size(reduce_dtype);
  switch (c) {
    case MemCategory::Params: return params * p;
    case MemCategory::Grads: return accum * a;
    case MemCategory::Master: return master_in_params ? 0 : optimizer * (split_master ? 2 : 4);
    case MemCategory::OptimM:
    case MemCategory::OptimV: return optimizer * 4;
    case MemCategory::CommBuffers:
      return 2 * staging * p + (reduction_buffers ? kReductionsInFlight * (chunk * size_t(world) * r + chunk * r) : 0) +
             kReductionsInFlight * replica_chunk * r;
    case MemCategory::Gathered: return ring_slots * ring_slot * p;
    case MemCategory::Other: return partials * 8 + offload_staging_bytes();
    default: return 0;
  }
}

size_t BufferPlan::total_bytes() const {
  size_t t = 0;
  for (size_t c = 0; c < kMemCategories; ++c) t += bytes(MemCategory(c));
  return t;
}

size_t BufferPlan::host_bytes() const {
  if (!offload) return 0;
  return bytes(MemCategory::Master) + bytes(MemCategory::OptimM) + bytes(MemCategory::OptimV) + offload_staging_bytes();
}

}  // namespace zero
