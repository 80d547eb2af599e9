// The launchers of the tensor-core attention kernels (attention_mma_kernels.cuh).
#include "cuda/check.h"
#include "cuda/kernel_launch.cuh"
#include "model/cuda/attention_launch.h"
#include "model/cuda/attention_mma_kernels.cuh"

namespace zero::model::cuda_attention::detail {
namespace {

template <int D>
void forward_at(const Geometry& g, const void* q, const void* k, const void* v, void* o, float* lse,
                cudaStream_t stream) {
  const int smem = mma_smem(MmaKernel::Forward, D).bytes;
  opt_in_shared_memory(reinterpret_cast<const void*>(forward_mma_kernel<D>), smem);
  ZERO_LAUNCH(forward_mma_kernel<D>, unsigned(row_grid_size(g.num_seqs, g.heads, g.max_seqlen)), kMmaThreads, smem,
              stream, static_cast<const u16*>(q), static_cast<const u16*>(k), static_cast<const u16*>(v), params_of(g),
              static_cast<u16*>(o), lse);
  CUDA_CHECK(kernels::last_launch_error());
}

template <int D>
void forward_wide_at(const Geometry& g, const void* q, const void* k, const void* v, void* o, float* lse,
                     cudaStream_t stream) {
  const int smem = mma_smem(MmaKernel::ForwardWide, D).bytes;
  opt_in_shared_memory(reinterpret_cast<const void*>(forward_wide_mma_kernel<D>), smem);
  ZERO_LAUNCH(forward_wide_mma_kernel<D>, unsigned(row_grid_size(g.num_seqs, g.heads, g.max_seqlen, kWideBlockQ)),
              kMmaThreads, smem, stream, static_cast<const u16*>(q), static_cast<const u16*>(k),
              static_cast<const u16*>(v), params_of(g), static_cast<u16*>(o), lse);
  CUDA_CHECK(kernels::last_launch_error());
}

template <int D>
void backward_at(const Geometry& g, const void* q, const void* k, const void* v, const void* d_o, const float* lse,
                 const float* row_dot, void* dq, void* dk, void* dv, cudaStream_t stream) {
  const Params p = params_of(g);
  const u16 *qt = static_cast<const u16*>(q), *kt = static_cast<const u16*>(k), *vt = static_cast<const u16*>(v),
            *dot = static_cast<const u16*>(d_o);
  const int dq_smem = mma_smem(MmaKernel::Dq, D).bytes;
  if (g.wide) {
    const int smem = mma_smem(MmaKernel::DkDvWide, D).bytes;
    opt_in_shared_memory(reinterpret_cast<const void*>(dkdv_wide_mma_kernel<D>), smem);
    ZERO_LAUNCH(dkdv_wide_mma_kernel<D>, unsigned(column_grid_size(g.num_seqs, g.kv_heads, g.max_seqlen, kWideBlockK)),
                kWideDkDvThreads, smem, stream, qt, kt, vt, dot, lse, row_dot, p, static_cast<u16*>(dk),
                static_cast<u16*>(dv));
  } else {
    const int smem = mma_smem(MmaKernel::DkDv, D).bytes;
    opt_in_shared_memory(reinterpret_cast<const void*>(dkdv_mma_kernel<D>), smem);
    ZERO_LAUNCH(dkdv_mma_kernel<D>, unsigned(column_grid_size(g.num_seqs, g.kv_heads, g.max_seqlen)), kMmaThreads,
                smem, stream, qt, kt, vt, dot, lse, row_dot, p, static_cast<u16*>(dk), static_cast<u16*>(dv));
  }
  CUDA_CHECK(kernels::last_launch_error());
  opt_in_shared_memory(reinterpret_cast<const void*>(dq_mma_kernel<D>), dq_smem);
  ZERO_LAUNCH(dq_mma_kernel<D>, unsigned(row_grid_size(g.num_seqs, g.heads, g.max_seqlen)), kMmaThreads, dq_smem,
              stream, qt, kt, vt, dot, lse, row_dot, p, static_cast<u16*>(dq));
  CUDA_CHECK(kernels::last_launch_error());
}

}  // namespace

void launch_forward_mma(const Geometry& g, const void* q, const void* k, const void* v, void* o, float* lse,
                        cudaStream_t stream) {
  if (g.wide) {
    if (g.head_dim == 128) return forward_wide_at<128>(g, q, k, v, o, lse, stream);
    return forward_wide_at<64>(g, q, k, v, o, lse, stream);
  }
  if (g.head_dim == 128) return forward_at<128>(g, q, k, v, o, lse, stream);
  forward_at<64>(g, q, k, v, o, lse, stream);
}

void launch_dkdv_dq_mma(const Geometry& g, const void* q, const void* k, const void* v, const void* d_o,
                        const float* lse, const float* row_dot, void* dq, void* dk, void* dv, cudaStream_t stream) {
  if (g.head_dim == 128) return backward_at<128>(g, q, k, v, d_o, lse, row_dot, dq, dk, dv, stream);
  backward_at<64>(g, q, k, v, d_o, lse, row_dot, dq, dk, dv, stream);
}

}  // namespace zero::model::cuda_attention::detail
