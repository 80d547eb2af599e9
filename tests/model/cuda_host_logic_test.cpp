// Host-side logic of the CUDA model ops, checked without a GPU: the column-major GEMM of each linear op
// (literal shapes for a [rows, in] x [out, in] layer, and each product run through a plain column-major
// GEMM that reads the operands as cuBLASLt does, against the row-major definition), the operands' alignment
// the GEMM plans are chosen for, the per-batch upload layout (offsets, 256-byte alignment, total), the
// activation pool's size classes, and the activation dtype of each backend.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

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

// D = op(A) op(B) read the way cuBLASLt reads column-major operands described by stored_a / stored_b /
// stored_d (element (i, j) of a stored matrix at i + j * ld); written from the cuBLAS definition of
// transa / transb, not from gemm_shape.h's comment.
std::vector<double> column_major_gemm(const cuda_gemm::GemmShape& s, const std::vector<float>& a,
                                      const std::vector<float>& b) {
  const cuda_gemm::StoredMatrix sa = cuda_gemm::stored_a(s), sb = cuda_gemm::stored_b(s), sd = cuda_gemm::stored_d(s);
  // Each stored operand lies inside its buffer and has ld >= rows (cuBLASLt rejects less).
  EXPECT_GE(sa.ld, sa.rows);
  EXPECT_GE(sb.ld, sb.rows);
  EXPECT_GE(sd.ld, sd.rows);
  EXPECT_EQ(size_t(sa.ld * sa.cols), a.size());
  EXPECT_EQ(size_t(sb.ld * sb.cols), b.size());
  auto op_a = [&](int64_t i, int64_t p) { return s.trans_a ? a[size_t(p + i * sa.ld)] : a[size_t(i + p * sa.ld)]; };
  auto op_b = [&](int64_t p, int64_t j) { return s.trans_b ? b[size_t(j + p * sb.ld)] : b[size_t(p + j * sb.ld)]; };
  std::vector<double> d(size_t(sd.ld * sd.cols), 0.0);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < s.k; ++p) acc += double(op_a(i, p)) * op_b(p, j);
      d[size_t(i + j * sd.ld)] = acc;
    }
  return d;
}

std::vector<float> draws(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  for (float& e : x) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    e = float(int64_t(seed >> 40) % 17 - 8) / 8.0f;
  }
  return x;
}

// Each linear op as cuda_model_ops.cpp hands it to LtGemm (forward: A = w, B = x; input grad: A = w, B = dy;
// weight grad: A = x, B = dy) gives the row-major product ModelOps defines, at odd sizes and at the tiny
// fixture's k_proj (in 48, out 36).
TEST(CudaGemmShape, EachLinearOpComputesItsRowMajorProduct) {
  using namespace cuda_gemm;
  for (const auto& [rows, in, out] : {std::array<int64_t, 3>{7, 5, 3}, {13, 48, 36}, {1, 2, 9}}) {
    const std::vector<float> x = draws(size_t(rows * in), 1), w = draws(size_t(out * in), 2),
                             dy = draws(size_t(rows * out), 3);
    const std::vector<double> y = column_major_gemm(linear_forward_shape(rows, in, out), w, x);
    const std::vector<double> dx = column_major_gemm(linear_input_grad_shape(rows, in, out), w, dy);
    const std::vector<double> dw = column_major_gemm(linear_weight_grad_shape(rows, in, out), x, dy);
    ASSERT_EQ(y.size(), size_t(rows * out));
    ASSERT_EQ(dx.size(), size_t(rows * in));
    ASSERT_EQ(dw.size(), size_t(out * in));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {  // y = x w^T, row-major [rows, out]
        double want = 0;
        for (int64_t i = 0; i < in; ++i) want += double(x[size_t(r * in + i)]) * w[size_t(o * in + i)];
        EXPECT_EQ(y[size_t(r * out + o)], want) << "forward r " << r << " o " << o;
      }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < in; ++i) {  // dx = dy w, row-major [rows, in]
        double want = 0;
        for (int64_t o = 0; o < out; ++o) want += double(dy[size_t(r * out + o)]) * w[size_t(o * in + i)];
        EXPECT_EQ(dx[size_t(r * in + i)], want) << "input grad r " << r << " i " << i;
      }
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {  // dw = dy^T x, row-major [out, in] (torch's weight layout)
        double want = 0;
        for (int64_t r = 0; r < rows; ++r) want += double(dy[size_t(r * out + o)]) * x[size_t(r * in + i)];
        EXPECT_EQ(dw[size_t(o * in + i)], want) << "weight grad o " << o << " i " << i;
      }
  }
}

TEST(CudaGemmShape, PointerAlignmentAndPlanKeys) {
  using namespace cuda_gemm;
  auto at = [](uintptr_t a) { return reinterpret_cast<const void*>(a); };
  EXPECT_EQ(pointer_alignment(at(0x7f0000000000)), 256u);  // cudaMalloc's
  EXPECT_EQ(pointer_alignment(at(0x7f0000000100)), 256u);
  EXPECT_EQ(pointer_alignment(at(0x7f0000000080)), 128u);
  EXPECT_EQ(pointer_alignment(at(0x7f0000005130)), 16u);   // 20784 bytes in: the fixture's bf16 gate_proj
  EXPECT_EQ(pointer_alignment(at(0x7f0000000002)), 2u);
  EXPECT_EQ(pointer_alignment(at(0x7f0000000001)), 1u);
  // A key differing only in alignment is another plan (its algorithm is chosen for that alignment).
  GemmKey a{linear_forward_shape(13, 48, 36), DType::BF16, DType::BF16};
  GemmKey b = a;
  b.align_a = 16;
  EXPECT_FALSE(a == b);
  EXPECT_NE(GemmKeyHash()(a), GemmKeyHash()(b));
}

TEST(CudaBatchUpload, LayoutIsAlignedAndSized) {
  // 300 tokens, 6 answers, 6 attention sequences (none shared), 120 distinct ids, head_dim 128.
  const cuda_batch::BatchLayout l = cuda_batch::batch_layout(300, 6, 6, false, 120, 128);
  EXPECT_EQ(l.tokens, 0u);
  EXPECT_EQ(l.cu_seqlens, 1280u);  // 1200 bytes rounded up to 256
  EXPECT_EQ(l.hidden, 1536u);      // no bytes
  EXPECT_EQ(l.pooled, 1536u);
  EXPECT_EQ(l.by_id, 1792u);
  EXPECT_EQ(l.ids, 3072u);
  EXPECT_EQ(l.id_start, 3584u);
  EXPECT_EQ(l.cos, 4096u);
  EXPECT_EQ(l.sin, 4096u + 76800u);
  EXPECT_EQ(l.total, 4096u + 2 * 76800u);
  // The same answers as 3 shared-prompt pairs: 3 attention sequences and their hidden spans.
  const cuda_batch::BatchLayout s = cuda_batch::batch_layout(300, 6, 3, true, 120, 128);
  EXPECT_EQ(s.hidden, 1536u);
  EXPECT_EQ(s.pooled, 1792u);
  EXPECT_EQ(s.total, 4352u + 2 * 76800u);
}

TEST(CudaActivationPool, BlockSizes) {
  EXPECT_EQ(cuda_pool::block_bytes(0), 512u);
  EXPECT_EQ(cuda_pool::block_bytes(1), 512u);
  EXPECT_EQ(cuda_pool::block_bytes(513), 1024u);
  EXPECT_EQ(cuda_pool::block_bytes(1 << 20), size_t(1) << 20);
  EXPECT_EQ(cuda_pool::block_bytes((5 << 20) + 3), (size_t(5) << 20) + 512);
}

TEST(ActivationDtype, CpuBackendKeepsFp32) { EXPECT_EQ(make_cpu_model_ops()->activation_dtype(), DType::F32); }

}  // namespace
}  // namespace zero::model
