// The engine's buffers as arithmetic: how many elements of which dtype each one holds, for a stage,
// dtypes and a partition. The engine allocates exactly this and the planner reports exactly this, so
// the sizing lives here once. Pure arithmetic: allocates nothing.
//
//   params      p * Psi           (stage 3: p * S)              compute dtype
//   accumulator a * Psi           (stages 2-3: a * S)           gradient accumulation dtype
//   master, m, v  4 * Psi each    (stages 1-3: 4 * S each)      fp32; a split master (bf16 params) 2 * Psi
//                                                               (2 * S): its low halves, the params its high;
//                                                               fp32 params without offload: no master array,
//                                                               the params' own range is it (master_in_params)
//   bucket slots  2 * T * p       T = partition.max_staged (a bucket, or one piece of a split group)
//   send / recv   F * (C * W * r + C * r)                       reduce dtype, C = chunk elements per rank,
//                                                               F = kReductionsInFlight (2); none when the
//                                                               reductions are in place (one rank)
//   gather ring   (prefetch_depth + 1) * U * p at stage 3       U = partition.max_unit_padded; none at one rank
//                                                               (its shard is the whole group, read in place)
//   replica chunks  F * X * r                                   hybrid sharding over R > 1 groups with the reduce
//                                                               dtype not the accumulation dtype: the replicas'
//                                                               all-reduce in the reduce dtype, X =
//                                                               replica_chunk (stages 2-3: C; 0-1: C * W);
//                                                               none otherwise (all-reduced in place)
//   step partials 8 * (1 + tensors [+ 3])                       fp64: sum of squares, non-finite counts
//                                                               [fixed-point sums: their exact sum of squares]
//   offload staging  2 K * (a + p) in host memory               zero.offload: chunks of gradients down and
//                                                               params up, K = min(optimizer, offload_chunk),
//                                                               two each (DeviceOps::kTransferSlots: one copied
//                                                               while the host steps or casts the other)
// Under zero.offload the master, m and v (and the staging) are host memory: host_bytes(); the rest is the
// backend's: device_bytes(). bytes(category) counts a category wherever it lives (staging under Other).
// with Psi = partition.total_padded, S = Psi / W, C = max(min(max_bucket_padded, bucket_elements) / W,
// partition.max_piece).
#pragma once
#include <cstddef>

#include "core/math/fixed_point.h"
#include "core/memory.h"
#include "zero/device_ops.h"
#include "zero/engine_config.h"
#include "zero/partition.h"

namespace zero {

// Reduction chunks on the wire at once (each with its own send / recv pair): the engine waits for the oldest
// before starting another. Two keep the wire busy while one is packed or unpacked; more in flight at once
// ran slower on MPI (bench numbers at Engine::launch_bucket).
inline constexpr int kReductionsInFlight = 2;
// 8-byte words of a math::FixedSquareSum, kept after the step partials under fixed-point sums.
inline constexpr size_t kFixedSquareWords = sizeof(math::FixedSquareSum) / 8;

struct BufferPlan {
  size_t params = 0, accum = 0, optimizer = 0;  // elements (optimizer: each of master, m, v)
  size_t staging = 0;                           // elements of one bucket slot (two slots)
  size_t chunk = 0;                             // reduction chunk: elements per rank (kReductionsInFlight pairs)
  bool reduction_buffers = true;                // send / recv allocated (not when reductions_in_place)
  size_t ring_slots = 0, ring_slot = 0;         // stage-3 gather ring: slots x elements
  size_t replica_chunk = 0;                     // hybrid sharding's replica chunks (kReductionsInFlight), 0: none
  size_t partials = 0;                          // fp64 step partials
  DType param_dtype = DType::F32, accum_dtype = DType::F32, reduce_dtype = DType::F32;
  bool split_master = false;  // master elements of 2 bytes (the low halves), else 4
  bool master_in_params = false;  // no master array: the fp32 params' own range is it (master_in_params())
  bool offload = false;       // master, m, v in host memory (zero.offload)
  size_t offload_chunk = 0;   // elements of the host staging (0 without offload)
  int world = 1;

  size_t bytes(MemCategory c) const;  // by the allocator's categories, wherever they live
  size_t total_bytes() const;
  size_t offload_staging_bytes() const {
    return size_t(DeviceOps::kTransferSlots) * offload_chunk * (dtype_size(accum_dtype) + dtype_size(param_dtype));
  }
  size_t host_bytes() const;    // what zero.offload keeps in host memory (0 without it)
  size_t device_bytes() const { return total_bytes() - host_bytes(); }
};

// `replicas`: hybrid sharding's shard groups (zero/engine.h; `part` is then a group's), 1 without it.
BufferPlan plan_buffers(const EngineConfig& cfg, const Partition& part, int replicas = 1);

// fp32 parameters on the backend with the optimizer (no zero.offload): the master would be an fp32 copy of the
// params' own range, so it is that range itself, as plain fp32 training keeps it (FSDP without mixed precision
// holds no second copy either): AdamW updates the parameters in place, no master array (4 bytes a parameter
// fewer, 16 in all at stage 0), and no cast after the step. A split master's high halves are its params too.
inline bool master_in_params(const EngineConfig& cfg) {
  return cfg.param_dtype == DType::F32 && !cfg.split_master && !cfg.offload_optimizer;
}
// Whether sync_params casts the master into the params after each step (neither when they are one array).
inline bool casts_params(const EngineConfig& cfg) { return !cfg.split_master && !master_in_params(cfg); }

// Hybrid sharding: the replicas' all-reduce goes on the wire in the reduce dtype, as the group's reductions do
// (FSDP's HYBRID_SHARD with a reduce dtype does the same), through chunks of their own when that is not the
// accumulator's dtype; else in place.
inline bool replica_reduction_buffered(const EngineConfig& cfg, int replicas) {
  return replicas > 1 && cfg.reduce_dtype != cfg.accum_dtype;
}

// Stage 3 on one rank: a rank's shard of a group is the whole (padded) group, laid out as its all-gather
// would write it, so the model reads the parameters where they are: no ring, no copy per use.
inline bool gathers_in_place(const Partition& part) { return part.world == 1; }

// One rank: the sum over one rank is the values themselves, so a reduction changes nothing when the reduce
// dtype holds what it reduces exactly (the gradients, in the param dtype, at stages 2-3; the accumulator at
// stages 0-1): the same dtype, bf16 widened to fp32, or fixed point into a fixed-point accumulator (the
// conversion the accumulator's add makes anyway). Then the engine adds each gradient into its accumulator as
// stage 0 does, issues no reduction and holds no send / recv buffers (the same bits); comm_plan counts none.
inline bool reductions_in_place(const EngineConfig& cfg, const Partition& part) {
  const DType from = cfg.stage >= 2 ? cfg.param_dtype : cfg.accum_dtype, rt = cfg.reduce_dtype;
  return part.world == 1 && (rt == from || (rt == DType::F32 && from == DType::BF16) ||
                             (rt == DType::FX64 && cfg.accum_dtype == DType::FX64));
}

}  // namespace zero
