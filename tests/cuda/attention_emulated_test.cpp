// The attention kernels of both paths without a GPU: their own source (model/cuda/attention_fma_kernels.cuh,
// attention_mma_kernels.cuh) compiled as host C++ and run under the SIMT emulator (simt_emulator.h: a
// thread per CUDA thread, barriers for __syncthreads and the warp collectives, mma.sync from the PTX
// fragment layout), per tensor (o, lse, dq, dk, dv) relative L2 against
//   - plain causal GQA attention in fp64 (tests/common/exact_attention.h, shares nothing with the
//     kernels): <= 1e-5 for the FMA path in fp32, <= 1e-2 in bf16 on either path (the GPU test's bounds,
//     attention_kernels_test);
//   - the CPU emulation of the tiling (model/attention_tiled.h), FMA path in fp32: <= 1e-6 (the same sums
//     in the same order; the GPU test's bound).
// Ragged lengths over tile edges (1, 17, 63, 64, 65, 129, 130), GQA ratios 1, 2 and 4, head_dim 12 (the HF
// fixture's), 64 and 128; max_seqlen above the longest sequence once. Outputs start as NaN, so an element
// the kernels never write fails. What it cannot show: timing, the hardware's own rounding of exp/log and
// its accumulation order inside mma.sync, and the code behind `#if !ZERO_SIMT_EMULATION` (the two inline
// PTX instructions, whose operand layout is the one emulated here; the extern __shared__ declaration).
#include "tests/cuda/simt_emulator.h"  // first: the kernels below compile against it

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "model/attention_tiled.h"
#include "model/cuda/attention_fma_kernels.cuh"
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

// Kernel storage (fp32 or bf16), 64-byte aligned (the tensor-core kernels copy 16-byte vectors), filled
// with NaN bytes.
struct Buffer {
  Buffer(size_t n, bool bf16)
      : count(n), bf16(bf16), bytes((n * (bf16 ? 2 : 4) + 63) / 64 * 64), data(std::aligned_alloc(64, bytes)) {
    std::memset(data, 0xff, bytes);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void put(const std::vector<float>& x) {
    for (size_t i = 0; i < count; ++i) {
      if (bf16) static_cast<uint16_t*>(data)[i] = math::f32_to_bf16(x[i]);
      else static_cast<float*>(data)[i] = x[i];
    }
  }
  std::vector<float> get() const {
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i)
      x[i] = bf16 ? math::bf16_to_f32(static_cast<const uint16_t*>(data)[i]) : static_cast<const float*>(data)[i];
    return x;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  size_t count;
  bool bf16;
  size_t bytes;
  void* data;
};

float round_bf16(float x) { return math::bf16_to_f32(math::f32_to_bf16(x)); }

enum class Run { Fp32Fma, Bf16Fma, Bf16Mma };

struct Outputs {
  std::vector<float> o, lse, dq, dk, dv;
};

// Both passes of one path, as the launchers sequence them (forward; D = rowsum(dO * O) by the FMA
// file's row-dot kernel; dK/dV; dQ).
template <int D>
Outputs run_kernels(const Case& c, Run run, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, const std::vector<float>& d_o) {
  const bool bf16 = run != Run::Fp32Fma;
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t n = cu.back(), hq = c.heads, hkv = c.kv_heads;
  Buffer qb(q.size(), bf16), kb(k.size(), bf16), vb(v.size(), bf16), dob(d_o.size(), bf16), ob(q.size(), bf16),
      dqb(q.size(), bf16), dkb(k.size(), bf16), dvb(v.size(), bf16), lse(size_t(n * hq), false),
      row_dot(size_t(n * hq), false);
  qb.put(q), kb.put(k), vb.put(v), dob.put(d_o);

  int32_t max_len = 0;
  for (int32_t len : c.lengths) max_len = std::max(max_len, len);
  max_len += c.extra_max_seqlen;
  detail::Geometry g;
  g.cu_seqlens = cu.data(), g.num_seqs = int64_t(c.lengths.size()), g.max_seqlen = max_len, g.num_tokens = n;
  g.heads = hq, g.kv_heads = hkv, g.head_dim = c.head_dim, g.bf16 = bf16, g.mma = run == Run::Bf16Mma;
  const detail::Params p = detail::params_of(g);
  const auto rows = unsigned(row_grid_size(g.num_seqs, hq, max_len));
  const auto columns = unsigned(column_grid_size(g.num_seqs, hkv, max_len));
  const auto dot_blocks = unsigned((n * hq + kThreads - 1) / kThreads);
  float *l = lse.as<float>(), *rd = row_dot.as<float>();

  auto fma_path = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T *qt = qb.as<T>(), *kt = kb.as<T>(), *vt = vb.as<T>(), *dot = dob.as<T>();
    simt::launch(rows, kThreads, forward_smem(c.head_dim).bytes(), detail::forward_kernel<T>, qt, kt, vt, p,
                 ob.as<T>(), l);
    simt::launch(dot_blocks, kThreads, 0, detail::row_dot_kernel<T>, static_cast<const T*>(ob.as<T>()), dot, n * hq,
                 int(c.head_dim), rd);
    simt::launch(columns, kThreads, backward_smem(c.head_dim).bytes(), detail::dkdv_kernel<T>, qt, kt, vt, dot,
                 static_cast<const float*>(l), static_cast<const float*>(rd), p, dkb.as<T>(), dvb.as<T>());
    simt::launch(rows, kThreads, backward_smem(c.head_dim).bytes(), detail::dq_kernel<T>, qt, kt, vt, dot,
                 static_cast<const float*>(l), static_cast<const float*>(rd), p, dqb.as<T>());
  };
  if (run == Run::Fp32Fma) {
    fma_path(static_cast<float*>(nullptr));
  } else if (run == Run::Bf16Fma) {
    fma_path(static_cast<kernels::Bf16*>(nullptr));
  } else if constexpr (D == 64 || D == 128) {  // the tensor-core kernels' head dims
    using u16 = uint16_t;
    const u16 *qt = qb.as<u16>(), *kt = kb.as<u16>(), *vt = vb.as<u16>(), *dot = dob.as<u16>();
    simt::launch(rows, kMmaThreads, mma_smem(MmaKernel::Forward, D).bytes, detail::forward_mma_kernel<D>, qt, kt, vt,
                 p, ob.as<u16>(), l);
    simt::launch(dot_blocks, kThreads, 0, detail::row_dot_kernel<kernels::Bf16>,
                 static_cast<const kernels::Bf16*>(ob.as<kernels::Bf16>()), dob.as<const kernels::Bf16>(), n * hq,
                 int(c.head_dim), rd);
    simt::launch(columns, kMmaThreads, mma_smem(MmaKernel::DkDv, D).bytes, detail::dkdv_mma_kernel<D>, qt, kt, vt,
                 dot, static_cast<const float*>(l), static_cast<const float*>(rd), p, dkb.as<u16>(), dvb.as<u16>());
    simt::launch(rows, kMmaThreads, mma_smem(MmaKernel::Dq, D).bytes, detail::dq_mma_kernel<D>, qt, kt, vt, dot,
                 static_cast<const float*>(l), static_cast<const float*>(rd), p, dqb.as<u16>());
  } else {
    ADD_FAILURE() << "no tensor-core kernels at head_dim " << D;
  }
  return {ob.get(), lse.get(), dqb.get(), dkb.get(), dvb.get()};
}

template <class Want>
void expect_close(const std::string& what, const Outputs& got, const Want& want, double tol) {
  const std::pair<const char*, double> errs[] = {{"o", rel_l2(got.o, want.o)},    {"lse", rel_l2(got.lse, want.lse)},
                                                 {"dq", rel_l2(got.dq, want.dq)}, {"dk", rel_l2(got.dk, want.dk)},
                                                 {"dv", rel_l2(got.dv, want.dv)}};
  std::printf("  %-36s", what.c_str());
  for (const auto& [name, err] : errs) std::printf(" %s %.2e", name, err);
  std::printf("  (bound %.0e)\n", tol);
  for (const auto& [name, err] : errs) EXPECT_LE(err, tol) << what << ": " << name;
}

// The inputs of a case (q from [-3, 3): peaked rows, a moving running max; k, v, dO from [-1, 1)), rounded
// to bf16 when the run stores bf16, so the exact reference sees what the kernels see.
struct Inputs {
  std::vector<float> q, k, v, d_o;
};
Inputs inputs_of(const Case& c, bool bf16) {
  const int64_t n = cu_seqlens_of(c.lengths).back();
  uint64_t state = 0x3e1a + uint64_t(c.head_dim);
  auto draw = [&](int64_t count, float spread) {
    std::vector<float> x = testing::uniform(count, spread, state);
    if (bf16)
      for (float& e : x) e = round_bf16(e);
    return x;
  };
  Inputs in;
  in.q = draw(n * c.heads * c.head_dim, 3.0f);
  in.k = draw(n * c.kv_heads * c.head_dim, 1.0f);
  in.v = draw(n * c.kv_heads * c.head_dim, 1.0f);
  in.d_o = draw(n * c.heads * c.head_dim, 1.0f);
  return in;
}

template <int D>
void check(const Case& c, Run run) {
  ASSERT_EQ(c.head_dim, D);
  const bool bf16 = run != Run::Fp32Fma;
  const Inputs in = inputs_of(c, bf16);
  const Outputs got = run_kernels<D>(c, run, in.q, in.k, in.v, in.d_o);
  const char* name = run == Run::Fp32Fma ? "fp32 fma" : run == Run::Bf16Fma ? "bf16 fma" : "bf16 mma";
  expect_close(c.name + " " + name + " vs fp64", got,
               testing::exact_attention(in.q, in.k, in.v, in.d_o, c.lengths, c.heads, c.kv_heads, D),
               bf16 ? 1e-2 : 1e-5);
  if (run != Run::Fp32Fma) return;
  // fp32: the kernels compute what the tiling's CPU emulation computes.
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t n = cu.back();
  Outputs emu{std::vector<float>(n * c.heads * D), std::vector<float>(n * c.heads), std::vector<float>(n * c.heads * D),
              std::vector<float>(n * c.kv_heads * D), std::vector<float>(n * c.kv_heads * D)};
  const AttentionShape s{c.heads, c.kv_heads, D};
  attention_tiled_forward(in.q.data(), in.k.data(), in.v.data(), s, cu, emu.o.data(), emu.lse.data());
  attention_tiled_backward(in.q.data(), in.k.data(), in.v.data(), emu.o.data(), in.d_o.data(), emu.lse.data(), s, cu,
                           emu.dq.data(), emu.dk.data(), emu.dv.data());
  expect_close(c.name + " fp32 fma vs emulation", got, emu, 1e-6);
}

const Case kFixtureDim{"d12_gqa2_fixture", {17, 64, 3, 70}, 6, 3, 12};  // tests/fixtures/qwen3_rm_tiny's heads
const Case kDim64{"d64_gqa2_ragged", {1, 64, 65, 17}, 4, 2, 64, 7};
const Case kDim128{"d128_gqa4_edges", {130, 63, 1}, 4, 1, 128};
const Case kDim128Mha{"d128_mha_129", {129}, 1, 1, 128};

TEST(AttentionEmulated, FmaPathInFp32) {
  check<12>(kFixtureDim, Run::Fp32Fma);
  check<64>(kDim64, Run::Fp32Fma);
}

TEST(AttentionEmulated, FmaPathInBf16) {
  check<12>(kFixtureDim, Run::Bf16Fma);
  check<128>(kDim128, Run::Bf16Fma);
}

TEST(AttentionEmulated, TensorCorePathAtHeadDim64) { check<64>(kDim64, Run::Bf16Mma); }

TEST(AttentionEmulated, TensorCorePathAtHeadDim128) {
  check<128>(kDim128, Run::Bf16Mma);
  check<128>(kDim128Mha, Run::Bf16Mma);
}

// The emulator itself: barriers order shared-memory traffic as on a GPU (a block sum written before the
// barrier is read after it by every thread), and a barrier some threads never reach is an error, not a hang.
void block_sum_kernel(const float* in, float* out) {
  float* sh = reinterpret_cast<float*>(kernels::dynamic_shared());
  sh[threadIdx.x] = in[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  float sum = 0.0f;
  for (int i = 0; i < 64; ++i) sum += sh[(threadIdx.x + i) % 64];  // every thread reads every slot
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = sum + __shfl_xor_sync(0xffffffffu, float(threadIdx.x % 32), 1);
}
void divergent_barrier_kernel() {
  if (threadIdx.x < 16) __syncthreads();
}

TEST(SimtEmulator, BarriersAndShufflesBehaveAsOnTheGpu) {
  std::vector<float> in(128), out(128, NAN);
  for (int i = 0; i < 128; ++i) in[i] = float(i);
  simt::launch(2, 64, 64 * sizeof(float), block_sum_kernel, static_cast<const float*>(in.data()), out.data());
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 64; ++t)
      EXPECT_EQ(out[b * 64 + t], float(64 * 63 / 2 + 64 * 64 * b) + float((t % 32) ^ 1)) << b << " " << t;
}

TEST(SimtEmulator, ABarrierSomeThreadsNeverReachIsAnError) {
  try {
    simt::launch(1, 64, 0, divergent_barrier_kernel);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("16 of 64 threads wait at a barrier"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zero::model::cuda_attention
