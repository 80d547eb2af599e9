// How a kernel file launches and clears memory, through one macro and two functions, so the file also
// compiles as host C++ under the SIMT emulator (tests/cuda/simt_emulator.h, ZERO_SIMT_EMULATION): there
// a launch runs the kernel's blocks on the host, at once or when its stream gets to it (simt::on_stream),
// memory is host memory, and nothing fails late.
//   ZERO_LAUNCH(kernel, grid, block, shared_bytes, stream, args...)   kernel<<<grid, block, ...>>>(args...)
//   memset_async(p, value, bytes, stream)                              cudaMemsetAsync
//   memcpy_async(dst, src, bytes, stream)                              cudaMemcpyAsync, device to device
//   last_launch_error()                                                cudaGetLastError
// `kernel` must be one token (a template's commas would split the macro's arguments). Each launch, memset and
// memcpy counts one in cuda/launch_count.h (the step clock's launches by op). ZERO_LAUNCH is a statement.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/launch_count.h"

#if defined(ZERO_SIMT_EMULATION)
#include <cstring>
#define ZERO_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                                            \
  do {                                                                                                       \
    ::zero::cuda_launch::count();                                                                            \
    ::zero::simt::launch_on(stream, unsigned(grid), unsigned(block), size_t(shared_bytes), kernel, __VA_ARGS__); \
  } while (0)
namespace zero::kernels {
inline cudaError_t memset_async(void* p, int value, size_t bytes, cudaStream_t stream) {
  ::zero::cuda_launch::count();
  ::zero::simt::on_stream(stream, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
inline cudaError_t memcpy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  ::zero::cuda_launch::count();
  ::zero::simt::on_stream(stream, [=] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}
inline cudaError_t last_launch_error() { return cudaSuccess; }
}  // namespace zero::kernels
#else
#define ZERO_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  do {                                                              \
    ::zero::cuda_launch::count();                                   \
    kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__);     \
  } while (0)
namespace zero::kernels {
inline cudaError_t memset_async(void* p, int value, size_t bytes, cudaStream_t stream) {
  ::zero::cuda_launch::count();
  return cudaMemsetAsync(p, value, bytes, stream);
}
inline cudaError_t memcpy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  ::zero::cuda_launch::count();
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
}
inline cudaError_t last_launch_error() { return cudaGetLastError(); }
}  // namespace zero::kernels
#endif
