#include "zero/engine_config.h"

#include "core/check.h"

namespace zero {

void validate(const EngineConfig& c) {
  ZERO_REQUIRE(c.stage >= 0 && c.stage <= 3, ConfigError, "zero.stage: unknown stage {} (expected 0, 1, 2 or 3)",
               c.stage);
  ZERO_REQUIRE(c.bucket_elements > 0, ConfigError, "zero.bucket_elements must be positive (got 0)");
  ZERO_REQUIRE(c.prefetch_depth >= 0, ConfigError, "zero.prefetch_depth must be >= 0 (got {})", c.prefetch_depth);
  ZERO_REQUIRE(c.accum_steps >= 1, ConfigError, "batch.accum must be >= 1 (got {})", c.accum_steps);
  ZERO_REQUIRE(c.clip_norm >= 0, ConfigError, "optim.clip_norm must be >= 0 (got {})", c.clip_norm);
  ZERO_REQUIRE(!c.split_master || c.param_dtype == DType::BF16, ConfigError,
               "zero.master split keeps the master's high halves as the parameters: it needs zero.param_dtype bf16 "
               "(got {})",
               dtype_name(c.param_dtype));
  ZERO_REQUIRE(!(c.offload_optimizer && c.split_master), ConfigError,
               "zero.offload optimizer keeps an fp32 master in host memory, zero.master split keeps it in the bf16 "
               "params on the device: choose one (zero.master fp32, or auto)");
  ZERO_REQUIRE(c.offload_threads >= 1, ConfigError, "offload threads must be at least 1 (got {})", c.offload_threads);
  ZERO_REQUIRE(c.offload_chunk >= 1, ConfigError, "the offload chunk must be at least 1 element (got 0)");
  ZERO_REQUIRE((c.accum_dtype == DType::FX64) == (c.reduce_dtype == DType::FX64), ConfigError,
               "fixed-point gradient sums need both zero.accum_dtype and zero.reduce_dtype fixed64 (got {} and {}): "
               "a sum rounded on the way would not be exact",
               dtype_name(c.accum_dtype), dtype_name(c.reduce_dtype));
  // The guard's count at grad_ready is also the fixed-point range check: without it a term past the limit
  // would be clamped into the sum.
  ZERO_REQUIRE(c.accum_dtype != DType::FX64 || c.nan_guard, ConfigError,
               "fixed-point gradient sums need the NaN guard on: it also refuses the terms past their range");
}

ResolvedBatch resolve_batch(const BatchSpec& s, int world) {
  ZERO_REQUIRE(world >= 1, ConfigError, "world size must be at least 1 (got {})", world);
  ZERO_REQUIRE(s.global >= 0 && s.micro >= 0 && s.accum >= 0, ConfigError,
               "batch sizes must not be negative (global {}, micro {}, accum {})", s.global, s.micro, s.accum);
  const int given = (s.global > 0) + (s.micro > 0) + (s.accum > 0);
  ZERO_REQUIRE(given >= 2, ConfigError,
               "batch: give at least two of global, micro and accum (got global {}, micro {}, accum {})", s.global,
               s.micro, s.accum);
  ResolvedBatch r{s.global, s.micro, s.accum, world};
  const int64_t W = world;
  if (s.global == 0) {
    r.global = s.micro * s.accum * W;
  } else if (s.micro == 0) {
    ZERO_REQUIRE(s.global % (s.accum * W) == 0, ConfigError,
                 "batch: global {} is not divisible by accum {} x world {}: no whole micro-batch fits", s.global,
                 s.accum, W);
    r.micro = s.global / (s.accum * W);
  } else if (s.accum == 0) {
    ZERO_REQUIRE(s.global % (s.micro * W) == 0, ConfigError,
                 "batch: global {} is not divisible by micro {} x world {}: choose a global batch that is a "
                 "multiple of {}",
                 s.global, s.micro, W, s.micro * W);
    r.accum = s.global / (s.micro * W);
  } else {
    ZERO_REQUIRE(s.global == s.micro * s.accum * W, ConfigError,
                 "batch: inconsistent: global {} != micro {} x accum {} x world {} (= {}); give two of them and "
                 "let the third be derived",
                 s.global, s.micro, s.accum, W, s.micro * s.accum * W);
  }
  return r;
}

}  // namespace zero
