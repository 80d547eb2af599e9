// RoPE's rotate_half rotation of one pair, for the CPU model and the CUDA kernels. HF's Qwen3 pairs
// x[i] with x[i + d/2] and rotates the pair by the angle of frequency i:
//   (a, b) -> (a cos - b sin, b cos + a sin),
// and backward applies the transpose, the inverse rotation:
//   (a, b) -> (a cos + b sin, b cos - a sin).
// Each product is rounded, then the sum (rounding.h): no fused multiply-add on either side.
#pragma once
#include "core/math/hd.h"
#include "core/math/rounding.h"

namespace zero::math {

struct RopePair {
  float a;  // x[i]
  float b;  // x[i + d/2]
};

ZERO_HD RopePair rope_rotate(RopePair x, float cos_i, float sin_i) {
  return {sub_rn(mul_rn(x.a, cos_i), mul_rn(x.b, sin_i)), add_rn(mul_rn(x.b, cos_i), mul_rn(x.a, sin_i))};
}

ZERO_HD RopePair rope_rotate_transpose(RopePair x, float cos_i, float sin_i) {
  return {add_rn(mul_rn(x.a, cos_i), mul_rn(x.b, sin_i)), sub_rn(mul_rn(x.b, cos_i), mul_rn(x.a, sin_i))};
}

}  // namespace zero::math
