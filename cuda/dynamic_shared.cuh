// A kernel's dynamic shared memory (the bytes given at launch), through one function so the kernel source
// also compiles as host C++ under the SIMT emulator (tests/cuda/simt_emulator.h, ZERO_SIMT_EMULATION),
// which hands out the block's buffer instead. 16-byte aligned in both.
#pragma once

#if defined(ZERO_SIMT_EMULATION)
namespace zero::kernels {
__device__ __forceinline__ char* dynamic_shared() { return simt::dynamic_shared(); }
}  // namespace zero::kernels
#else
#include <cuda_runtime.h>  // float4

namespace zero::kernels {
__device__ __forceinline__ char* dynamic_shared() {
  extern __shared__ float4 zero_dynamic_shared[];
  return reinterpret_cast<char*>(zero_dynamic_shared);
}
}  // namespace zero::kernels
#endif
