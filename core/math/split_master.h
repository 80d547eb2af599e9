// An fp32 master weight kept as two 16-bit halves (zero.master: split), so bf16 training holds no
// separate fp32 copy: `high` is the bf16 parameter the model computes with, `low` the master's low 16
// bits. Together they are the master exactly: join(split_high(x), split_low(x)) == x bit for bit for
// every finite x, so AdamW, checkpoints and resume see the same fp32 values as with a separate master.
//
// high rounds half away from zero (0x8000 added to the bits, then truncated), not ties to even as
// f32_to_bf16 does: under ties to even, x = (h, 0x8000) with h even and x' = (h - 1, 0x8000) both round
// to h, and 16 low bits could not tell them apart. Away from zero, high = h + 1 exactly when low >= 0x8000,
// so join subtracts that carry. The two roundings differ only on exact ties (1 in 65536 values), by one
// bf16 ulp. A NaN's high is the quiet NaN (never a finite value: masters are finite, the NaN guard skips
// the steps that would not be).
#pragma once
#include <cstdint>

#include "core/math/bf16.h"
#include "core/math/hd.h"

namespace zero::math {

ZERO_HD uint16_t split_high(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(0x7fc0u | ((u >> 16) & 0x8000u));
  return uint16_t((u + 0x8000u) >> 16);  // a carry out of the mantissa moves into the exponent
}

ZERO_HD uint16_t split_low(float x) { return uint16_t(f32_bits(x) & 0xffffu); }

ZERO_HD float split_join(uint16_t high, uint16_t low) {
  const uint32_t h = uint32_t(high) - (low >= 0x8000u ? 1u : 0u);
  return f32_from_bits((h << 16) | low);
}

}  // namespace zero::math
