// What the engine is told: stage, buckets, prefetch, dtypes, optimizer, clipping; and the batch
// contract (global = micro x accum x world; any two given, the third derived).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"

namespace zero {

struct EngineConfig {
  int stage = 0;                       // 0 (DDP), 1, 2 or 3
  size_t bucket_elements = 1u << 24;   // reduction bucket size, in (padded) elements (pmtrain's on CUDA)
  int prefetch_depth = 1;              // stage 3: groups all-gathered ahead of use
  DType param_dtype = DType::F32;      // compute parameters (what the model reads)
  DType accum_dtype = DType::F32;      // gradient accumulation across micro-steps
  DType reduce_dtype = DType::F32;     // gradients on the wire
  // FX64 for both (fixed_point_sums): gradient sums exact in 64-bit fixed point (core/math/fixed_point.h),
  // so a step's result does not depend on how its micro-batches are spread over ranks and micro-steps.
  // bf16 params only: the fp32 master kept as the bf16 params (its high halves) plus its low 16 bits
  // (core/math/split_master.h): the same fp32 values in 2 bytes a master element instead of 4.
  bool split_master = false;
  // zero.offload optimizer (ZeRO-Offload): the fp32 master, m and v live in host memory and AdamW runs on the
  // host (offload_threads threads), a chunk at a time: the chunk's gradients come down, its new params go up.
  // The backend's memory keeps only the params, the gradient accumulator and the comm buffers. Not with
  // split_master (whose master is the params themselves).
  bool offload_optimizer = false;
  int offload_threads = 1;
  size_t offload_chunk = size_t(1) << 22;  // elements a host transfer and AdamW pass take (16 MiB of fp32)
  int accum_steps = 1;                 // micro-steps per optimizer step (from the batch contract)
  float clip_norm = 0.0f;              // 0 = no clipping
  bool nan_guard = true;               // skip steps with non-finite gradients
  optim::AdamWConfig adamw;
  optim::LrSchedule schedule;
};

inline bool fixed_point_sums(const EngineConfig& c) { return c.accum_dtype == DType::FX64; }

// Throws ConfigError naming the offending key for an unknown stage, a bucket size of 0, a negative
// prefetch depth, accumulation below 1.
void validate(const EngineConfig& c);

// The batch contract, in pairs. 0 means "derive me".
struct BatchSpec {
  int64_t global = 0;
  int64_t micro = 0;
  int64_t accum = 0;
};
struct ResolvedBatch {
  int64_t global, micro, accum;
  int world;
};
// global = micro x accum x world. Any two of (global, micro, accum) given: the third is derived (an
// error if it does not divide); all three given: they must agree.
ResolvedBatch resolve_batch(const BatchSpec& spec, int world);

}  // namespace zero
