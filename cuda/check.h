// CUDA_CHECK / NCCL_CHECK / CUBLAS_CHECK: turn a failed CUDA, NCCL or cuBLAS call into a zero::Error
// naming file:line, the call, the rank and host, and the library's own error string. No other logic.
// CUBLAS_CHECK expands to cublasGetStatusString: include <cublas_v2.h> where it is used.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

namespace zero {
[[noreturn]] void throw_gpu_error(const char* file, int line, const char* call, const char* library, int code,
                                  const char* what);
// For destructors (which must not throw): prints the same message to stderr and returns.
void report_gpu_error(const char* file, int line, const char* call, const char* library, int code,
                      const char* what);
}  // namespace zero

#define CUDA_CHECK(call)                                                                                   \
  do {                                                                                                     \
    const cudaError_t cuda_rc_ = (call);                                                                   \
    if (cuda_rc_ != cudaSuccess)                                                                           \
      ::zero::throw_gpu_error(__FILE__, __LINE__, #call, "CUDA", int(cuda_rc_), cudaGetErrorString(cuda_rc_)); \
  } while (0)

#define NCCL_CHECK(call)                                                                                   \
  do {                                                                                                     \
    const ncclResult_t nccl_rc_ = (call);                                                                  \
    if (nccl_rc_ != ncclSuccess)                                                                           \
      ::zero::throw_gpu_error(__FILE__, __LINE__, #call, "NCCL", int(nccl_rc_), ncclGetErrorString(nccl_rc_)); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                                 \
  do {                                                                                                     \
    const cublasStatus_t cublas_rc_ = (call);                                                              \
    if (cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                               \
      ::zero::throw_gpu_error(__FILE__, __LINE__, #call, "cuBLAS", int(cublas_rc_),                        \
                              cublasGetStatusString(cublas_rc_));                                          \
  } while (0)

// In destructors: report and carry on.
#define CUDA_WARN(call)                                                                                    \
  do {                                                                                                     \
    const cudaError_t cuda_rc_ = (call);                                                                   \
    if (cuda_rc_ != cudaSuccess)                                                                           \
      ::zero::report_gpu_error(__FILE__, __LINE__, #call, "CUDA", int(cuda_rc_), cudaGetErrorString(cuda_rc_)); \
  } while (0)
