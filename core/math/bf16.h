// THE fp32 <-> bf16 conversion, on the bits (a bf16 is the upper half of an fp32). Both backends convert
// through it: the CPU backend on Eigen::bfloat16 storage (zero/cpu_ops.cpp, same bits) and the CUDA
// kernels on raw uint16_t (cuda/kernels.cu), so a value rounds to the same bf16 on either side.
// fp32 -> bf16 rounds to nearest, ties to even; values past the largest bf16 round up into inf; a NaN
// becomes the quiet NaN 0x7fc0 with its sign kept (truncating could turn a NaN whose payload is only in
// the low bits into inf). Bit for bit Eigen::bfloat16's float_to_bfloat16_rtne (the tests hold it to it).
// bf16 -> fp32 is exact.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/math/hd.h"

namespace zero::math {

ZERO_HD uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

ZERO_HD float f32_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

ZERO_HD uint16_t f32_to_bf16(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(0x7fc0u | ((u >> 16) & 0x8000u));  // NaN: quiet, signed
  // Adding 0x7fff plus the lowest kept bit, then truncating, rounds to nearest with ties to even; a carry
  // out of the mantissa moves into the exponent (the largest floats become inf).
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

ZERO_HD float bf16_to_f32(uint16_t b) { return f32_from_bits(uint32_t(b) << 16); }

}  // namespace zero::math
