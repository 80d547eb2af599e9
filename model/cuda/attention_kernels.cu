// The launchers of the attention kernels: the fp32-FMA path (attention_fma_kernels.cuh) here, the
// tensor-core path handed to attention_mma.cu after the shared row-dot kernel.
#include <cstdio>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/kernel_launch.cuh"
#include "model/cuda/attention_fma_kernels.cuh"
#include "model/cuda/attention_launch.h"

namespace zero::model::cuda_attention::detail {
namespace {

// Calls f(T*) with the element type (a null pointer of that type: a tag).
template <class F>
void with_elem(bool bf16, F&& f) {
  if (bf16) f(static_cast<Bf16*>(nullptr));
  else f(static_cast<float*>(nullptr));
}

}  // namespace

void opt_in_shared_memory(const void* kernel, int bytes) {
  int device = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > optin) {
    char what[160];
    std::snprintf(what, sizeof what, "attention kernel needs %d bytes of shared memory per block, the device allows %d",
                  bytes, optin);
    throw_gpu_error(__FILE__, __LINE__, "opt_in_shared_memory", "CUDA", int(cudaErrorInvalidConfiguration), what);
  }
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

void launch_forward(const Geometry& g, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream) {
  if (g.mma) return launch_forward_mma(g, q, k, v, o, lse, stream);
  const Params p = params_of(g);
  const int smem = forward_smem(p.d).bytes();
  const auto blocks = unsigned(row_grid_size(g.num_seqs, g.heads, g.max_seqlen));
  with_elem(g.bf16, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    opt_in_shared_memory(reinterpret_cast<const void*>(forward_kernel<T>), smem);
    ZERO_LAUNCH(forward_kernel<T>, blocks, kThreads, smem, stream, static_cast<const T*>(q), static_cast<const T*>(k),
                static_cast<const T*>(v), p, static_cast<T*>(o), lse);
    CUDA_CHECK(kernels::last_launch_error());
  });
}

void launch_backward(const Geometry& g, const void* q, const void* k, const void* v, const void* o, const void* d_o,
                     const float* lse, float* row_dot, void* dq, void* dk, void* dv, cudaStream_t stream) {
  const Params p = params_of(g);
  const int smem = backward_smem(p.d).bytes();
  const int64_t rows = g.num_tokens * g.heads;
  with_elem(g.bf16, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T *qt = static_cast<const T*>(q), *kt = static_cast<const T*>(k), *vt = static_cast<const T*>(v),
            *dot = static_cast<const T*>(d_o);
    ZERO_LAUNCH(row_dot_kernel<T>, unsigned((rows + kThreads - 1) / kThreads), kThreads, 0, stream,
                static_cast<const T*>(o), dot, rows, p.d, row_dot);
    CUDA_CHECK(kernels::last_launch_error());
    if (g.mma) return launch_dkdv_dq_mma(g, q, k, v, d_o, lse, row_dot, dq, dk, dv, stream);
    opt_in_shared_memory(reinterpret_cast<const void*>(dkdv_kernel<T>), smem);
    ZERO_LAUNCH(dkdv_kernel<T>, unsigned(column_grid_size(g.num_seqs, g.kv_heads, g.max_seqlen)), kThreads, smem,
                stream, qt, kt, vt, dot, lse, static_cast<const float*>(row_dot), p, static_cast<T*>(dk),
                static_cast<T*>(dv));
    CUDA_CHECK(kernels::last_launch_error());
    opt_in_shared_memory(reinterpret_cast<const void*>(dq_kernel<T>), smem);
    ZERO_LAUNCH(dq_kernel<T>, unsigned(row_grid_size(g.num_seqs, g.heads, g.max_seqlen)), kThreads, smem, stream, qt,
                kt, vt, dot, lse, static_cast<const float*>(row_dot), p, static_cast<T*>(dq));
    CUDA_CHECK(kernels::last_launch_error());
  });
}

}  // namespace zero::model::cuda_attention::detail
