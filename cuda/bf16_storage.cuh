// bf16 as its 16 bits in device code, converted by core/math/bf16.h (the CPU backend's conversion), and
// the load/store pair every kernel templated on its storage type uses: math in fp32, storage fp32 or bf16.
#pragma once
#include <cstdint>

#include "core/math/bf16.h"

namespace zero::kernels {

struct Bf16 {
  uint16_t bits;
};
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(Bf16 x) { return math::bf16_to_f32(x.bits); }
template <class T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ Bf16 from_f32<Bf16>(float x) { return Bf16{math::f32_to_bf16(x)}; }

}  // namespace zero::kernels
