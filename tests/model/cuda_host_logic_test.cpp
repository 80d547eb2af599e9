// Host-side logic of the CUDA model ops, checked without a GPU: the column-major GEMM of each linear op
// (literal shapes for a [rows, in] x [out, in] layer), the per-batch upload layout (offsets, 256-byte
// alignment, total), the activation pool's size classes, and the activation dtype of each backend.
#include <gtest/gtest.h>

#include "model/cpu/cpu_model_ops.h"
#include "model/cuda/activation_pool.h"
#include "model/cuda/batch_upload.h"
#include "model/cuda/gemm_shape.h"

namespace zero::model {
namespace {

TEST(CudaGemmShape, LinearOpsAsColumnMajorGemms) {
  using namespace cuda_gemm;
  // rows 300, in 2560, out 9728 (gate_proj of Qwen3-4B).
  EXPECT_EQ(linear_forward_shape(300, 2560, 9728), (GemmShape{true, false, 9728, 300, 2560, 2560, 2560, 9728}));
  EXPECT_EQ(linear_input_grad_shape(300, 2560, 9728), (GemmShape{false, false, 2560, 300, 9728, 2560, 9728, 2560}));
  EXPECT_EQ(linear_weight_grad_shape(300, 2560, 9728), (GemmShape{false, true, 2560, 9728, 300, 2560, 9728, 2560}));
  EXPECT_EQ(gemm_output_type(DType::BF16, DType::BF16), DType::BF16);
  EXPECT_EQ(gemm_output_type(DType::BF16, DType::F32), DType::F32);
  EXPECT_EQ(gemm_output_type(DType::F32, DType::BF16), DType::F32);  // through fp32 scratch
  const GemmKey a{linear_forward_shape(300, 2560, 9728), DType::BF16, DType::BF16};
  GemmKey b = a;
  EXPECT_EQ(GemmKeyHash()(a), GemmKeyHash()(b));
  b.in = DType::F32;
  EXPECT_FALSE(a == b);
}

TEST(CudaBatchUpload, LayoutIsAlignedAndSized) {
  // 300 tokens, 6 sequences, 120 distinct ids, head_dim 128.
  const cuda_batch::BatchLayout l = cuda_batch::batch_layout(300, 6, 120, 128);
  EXPECT_EQ(l.tokens, 0u);
  EXPECT_EQ(l.cu_seqlens, 1280u);  // 1200 bytes rounded up to 256
  EXPECT_EQ(l.pooled, 1536u);
  EXPECT_EQ(l.by_id, 1792u);
  EXPECT_EQ(l.ids, 3072u);
  EXPECT_EQ(l.id_start, 3584u);
  EXPECT_EQ(l.cos, 4096u);
  EXPECT_EQ(l.sin, 4096u + 76800u);
  EXPECT_EQ(l.total, 4096u + 2 * 76800u);
}

TEST(CudaActivationPool, SizeClasses) {
  EXPECT_EQ(cuda_pool::block_bytes(0), 512u);
  EXPECT_EQ(cuda_pool::block_bytes(1), 512u);
  EXPECT_EQ(cuda_pool::block_bytes(513), 1024u);
  EXPECT_EQ(cuda_pool::block_bytes(1 << 20), size_t(1) << 20);
  EXPECT_EQ(cuda_pool::block_bytes((1 << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(cuda_pool::block_bytes((5 << 20) + 3), size_t(6) << 20);
}

TEST(ActivationDtype, CpuBackendKeepsFp32) { EXPECT_EQ(make_cpu_model_ops()->activation_dtype(), DType::F32); }

}  // namespace
}  // namespace zero::model
