// The model's activation functions, one definition for the CPU model and the CUDA kernels, in fp32 (the
// MLP's SiLU) and fp64 (the pairwise loss): sigmoid, SiLU and its derivative, softplus. Arithmetic goes
// through rounding.h, so each formula rounds in the same order on both sides; exp and log1p are each
// side's own (glibc on the host, CUDA's on the device, both within a couple of ulp but not the same bits).
#pragma once
#include <cmath>

#include "core/math/hd.h"
#include "core/math/rounding.h"

namespace zero::math {

// 1 / (1 + exp(-z)), and e / (1 + e) with e = exp(z) for z < 0: exp(-z) cannot overflow and a very
// negative z keeps its tiny value instead of flushing to 0.
template <class T>
ZERO_HD T sigmoid(T z) {
  using std::exp;
  if (z >= T(0)) return div_rn(T(1), add_rn(T(1), exp(-z)));
  const T e = exp(z);
  return div_rn(e, add_rn(T(1), e));
}

// silu(x) = x * sigmoid(x) (HF's "silu", the gate of Qwen3's SwiGLU MLP).
template <class T>
ZERO_HD T silu(T x) {
  return mul_rn(x, sigmoid(x));
}

// d silu / dx = s (1 + x (1 - s)) with s = sigmoid(x), torch's silu_backward.
template <class T>
ZERO_HD T silu_grad(T x) {
  const T s = sigmoid(x);
  return mul_rn(s, add_rn(T(1), mul_rn(x, sub_rn(T(1), s))));
}

// log(1 + exp(z)) without overflow: z + log1p(exp(-z)) for z > 0 (exp(-z) < 1), log1p(exp(z)) otherwise.
// softplus(r_rejected - r_chosen) is the pairwise loss -logsigmoid(r_chosen - r_rejected).
template <class T>
ZERO_HD T softplus(T z) {
  using std::exp;
  using std::log1p;
  return z > T(0) ? add_rn(z, log1p(exp(-z))) : log1p(exp(z));
}

}  // namespace zero::math
