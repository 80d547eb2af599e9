// The tensor-core attention kernels (model/cuda/attention_mma_kernels.cuh) without a GPU: their own
// source compiled as host C++ and run under the SIMT emulator (simt_emulator.h: a thread per CUDA thread,
// barriers for __syncthreads and the warp collectives, mma.sync from the PTX fragment layout), against
//   plain causal GQA attention in fp64 (tests/common/exact_attention.h, shares nothing with the kernels)
// per tensor (o, lse, dq, dk, dv), relative L2 <= 1e-2: the bound the GPU test (attention_kernels_test)
// holds the same kernels to in bf16. Ragged lengths over tile edges (1, 17, 63, 64, 65, 129, 130), GQA
// ratios 1, 2 and 4, head_dim 64 and 128; max_seqlen above the longest sequence once. Outputs start as
// NaN (0xffff), so an element the kernels never write fails. What it cannot show: timing, the hardware's
// own accumulation order, and code behind `#if !ZERO_SIMT_EMULATION` (the inline PTX: two instructions,
// whose operand layout is the one emulated here).
#include "tests/cuda/simt_emulator.h"  // first: the kernels below compile against it

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "model/cuda/attention_mma_kernels.cuh"
#include "tests/common/exact_attention.h"

namespace zero::model::cuda_attention {
namespace {

using testing::cu_seqlens_of;
using testing::rel_l2;

struct Case {
  std::string name;
  std::vector<int32_t> lengths;
  int64_t heads, kv_heads, head_dim;
  int32_t extra_max_seqlen = 0;
};

// bf16 storage, 64-byte aligned (the kernels' 16-byte vector copies), filled with NaN.
struct Bf16Buffer {
  explicit Bf16Buffer(size_t n) : count(n), data(static_cast<uint16_t*>(std::aligned_alloc(64, (n * 2 + 63) / 64 * 64))) {
    std::fill(data, data + n, uint16_t(0xffff));
  }
  ~Bf16Buffer() { std::free(data); }
  Bf16Buffer(const Bf16Buffer&) = delete;
  Bf16Buffer& operator=(const Bf16Buffer&) = delete;
  void put(const std::vector<float>& x) {
    for (size_t i = 0; i < count; ++i) data[i] = math::f32_to_bf16(x[i]);
  }
  std::vector<float> get() const {
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = math::bf16_to_f32(data[i]);
    return x;
  }
  size_t count;
  uint16_t* data;
};

float round_bf16(float x) { return math::bf16_to_f32(math::f32_to_bf16(x)); }

template <int D>
void run_case(const Case& c) {
  ASSERT_EQ(c.head_dim, D);
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t n = cu.back(), hq = c.heads, hkv = c.kv_heads;
  uint64_t state = 0x3e1a + uint64_t(D);
  auto draw = [&](int64_t count, float spread) {
    std::vector<float> x = testing::uniform(count, spread, state);
    for (float& e : x) e = round_bf16(e);  // the exact reference sees what the kernels see
    return x;
  };
  const std::vector<float> q = draw(n * hq * D, 3.0f), k = draw(n * hkv * D, 1.0f), v = draw(n * hkv * D, 1.0f),
                           d_o = draw(n * hq * D, 1.0f);
  Bf16Buffer qb(q.size()), kb(k.size()), vb(v.size()), dob(d_o.size()), ob(q.size()), dqb(q.size()), dkb(k.size()),
      dvb(v.size());
  qb.put(q), kb.put(k), vb.put(v), dob.put(d_o);
  std::vector<float> lse(size_t(n * hq), NAN), row_dot(size_t(n * hq), NAN);

  int32_t max_len = 0;
  for (int32_t len : c.lengths) max_len = std::max(max_len, len);
  max_len += c.extra_max_seqlen;
  detail::Geometry g;
  g.cu_seqlens = cu.data(), g.num_seqs = int64_t(c.lengths.size()), g.max_seqlen = max_len, g.num_tokens = n;
  g.heads = hq, g.kv_heads = hkv, g.head_dim = D, g.bf16 = true, g.mma = true;
  const detail::Params p = detail::params_of(g);

  simt::launch(unsigned(row_grid_size(g.num_seqs, hq, max_len)), kMmaThreads, mma_smem(MmaKernel::Forward, D).bytes,
               detail::forward_mma_kernel<D>, qb.data, kb.data, vb.data, p, ob.data, lse.data());
  // D = rowsum(dO * O) over the stored (bf16) O, as the FMA path's row-dot kernel computes it.
  const std::vector<float> o = ob.get();
  for (int64_t r = 0; r < n * hq; ++r) {
    float sum = 0.0f;
    for (int x = 0; x < D; ++x) sum = std::fma(d_o[r * D + x], o[r * D + x], sum);
    row_dot[r] = sum;
  }
  simt::launch(unsigned(column_grid_size(g.num_seqs, hkv, max_len)), kMmaThreads, mma_smem(MmaKernel::DkDv, D).bytes,
               detail::dkdv_mma_kernel<D>, qb.data, kb.data, vb.data, dob.data, lse.data(), row_dot.data(), p,
               dkb.data, dvb.data);
  simt::launch(unsigned(row_grid_size(g.num_seqs, hq, max_len)), kMmaThreads, mma_smem(MmaKernel::Dq, D).bytes,
               detail::dq_mma_kernel<D>, qb.data, kb.data, vb.data, dob.data, lse.data(), row_dot.data(), p,
               dqb.data);

  const testing::ExactAttention want = testing::exact_attention(q, k, v, d_o, c.lengths, hq, hkv, D);
  const std::pair<const char*, double> errs[] = {{"o", rel_l2(o, want.o)},
                                                 {"lse", rel_l2(lse, want.lse)},
                                                 {"dq", rel_l2(dqb.get(), want.dq)},
                                                 {"dk", rel_l2(dkb.get(), want.dk)},
                                                 {"dv", rel_l2(dvb.get(), want.dv)}};
  std::printf("  %-28s", c.name.c_str());
  for (const auto& [name, err] : errs) std::printf(" %s %.2e", name, err);
  std::printf("  (bound 1e-2)\n");
  for (const auto& [name, err] : errs) EXPECT_LE(err, 1e-2) << c.name << ": " << name;
}

TEST(AttentionMmaEmulated, HeadDim64MatchesExactAttention) {
  run_case<64>({"d64_gqa2_ragged", {1, 64, 65, 17}, 4, 2, 64, 7});
}

TEST(AttentionMmaEmulated, HeadDim128MatchesExactAttention) {
  run_case<128>({"d128_gqa4_edges", {130, 63, 1}, 4, 1, 128});
  run_case<128>({"d128_mha_129", {129}, 1, 1, 128});
}

}  // namespace
}  // namespace zero::model::cuda_attention
