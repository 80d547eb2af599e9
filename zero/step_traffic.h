// The bytes each piece of the engine's gradient work and optimizer step reads and writes per element, every array
// once (the least a kernel can move): the engine declares them to the step clock, so pmtrain's ops line shows
// each piece's GB/s, and `pmtrain plan` prices the step's memory-bound work with the same numbers.
// p: the parameter dtype (the model's gradient views), a: the accumulator's, r: the reduction's (zero/engine_config.h).
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace zero::traffic {

// The gradient view read (nan_guard's non-finite count, each micro-step).
inline double finite_count(DType p) { return double(dtype_size(p)); }
// The view folded into the accumulator (stages 0-1, or one rank): view read, accumulator written, and read too
// after a step's first micro-step (the first overwrites it: Engine::first_micro).
inline double accumulate(DType p, DType a, bool first) {
  return double(dtype_size(p) + (first ? 1 : 2) * dtype_size(a));
}
// A copy into (or back out of) a send buffer in the reduction's dtype.
inline double pack(DType from, DType r) { return double(dtype_size(from) + dtype_size(r)); }
// The norm's read of the accumulator (fixed-point sums: 8 bytes an element, as DType::FX64 is).
inline double grad_norm(DType a) { return double(dtype_size(a)); }
// AdamW: the gradient read; the master (fp32, or a split master's two bf16 halves), m and v read and written.
inline double adamw(DType a) { return double(dtype_size(a)) + 6 * sizeof(float); }
// The fp32 master read, the parameter written (none with a split master: its high halves are the parameters).
inline double cast_params(DType p) { return double(sizeof(float) + dtype_size(p)); }

}  // namespace zero::traffic
