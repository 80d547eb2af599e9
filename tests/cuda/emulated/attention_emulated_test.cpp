// The attention kernels of both paths without a GPU, through the attention API (attention_kernels.h:
// argument checks, Path, the launchers) on the emulated backend (CMakeLists.txt here): the kernels' own
// source (attention_fma_kernels.cuh, attention_mma_kernels.cuh) compiled as host C++ and run under the
// SIMT emulator (simt_emulator.h: a thread per CUDA thread, barriers for __syncthreads and the warp
// collectives, mma.sync from the PTX fragment layout), per tensor (o, lse, dq, dk, dv) relative L2 against
//   - plain causal GQA attention in fp64 (tests/common/exact_attention.h, shares nothing with the
//     kernels): <= 1e-5 for the FMA path in fp32, <= 1e-2 in bf16 on either path (the GPU test's bounds,
//     attention_kernels_test);
//   - the CPU emulation of the tiling (model/attention_tiled.h), FMA path in fp32: <= 1e-6 (the same sums
//     in the same order; the GPU test's bound).
// Ragged lengths over tile edges (1, 17, 63, 64, 65, 129, 130), GQA ratios 1, 2 and 4, head_dim 12 (the HF
// fixture's), 64 and 128; max_seqlen above the longest sequence once; shared-prompt pairs (hidden spans)
// against their answers computed apart (exact_attention_hidden). Outputs start as NaN, so an element
// the kernels never write fails. What it cannot show: timing, the hardware's own rounding of exp/log and
// its accumulation order inside mma.sync, and the code behind `#if !ZERO_SIMT_EMULATION` (the two inline
// PTX instructions, whose operand layout is the one emulated here; the extern __shared__ declaration).
#include "tests/cuda/simt_emulator.h"  // first: the emulator's own test kernels below compile against it

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "cuda/dynamic_shared.cuh"
#include "model/attention_tiled.h"
#include "model/cuda/attention_kernels.h"
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
  // v and dv as the last columns of [q | k | v]-wide rows (the fused projection's layout, v_stride and
  // dv_stride), the columns before them never to be touched.
  bool fused_v = false;
  std::vector<int32_t> hidden = {};  // begin, end per sequence (shared-prompt pairs), or empty
};

// Kernel storage (fp32 or bf16), 256-byte aligned (the tensor-core kernels copy 16-byte vectors, the
// backward workspace wants 256), filled with NaN bytes.
struct Buffer {
  Buffer(size_t n, bool bf16)
      : count(n), bf16(bf16), bytes((n * (bf16 ? 2 : 4) + 255) / 256 * 256), data(std::aligned_alloc(256, bytes)) {
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

enum class Run { Fp32Fma, Bf16Fma, Bf16Mma, Bf16MmaWide };

struct Outputs {
  std::vector<float> o, lse, dq, dk, dv;
};

// Forward and backward of one path through the attention API, as CudaModelOps calls it.
Outputs run_kernels(const Case& c, Run run, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, const std::vector<float>& d_o) {
  const bool bf16 = run != Run::Fp32Fma;
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t n = cu.back(), hq = c.heads, hkv = c.kv_heads;
  const int64_t kv_cols = hkv * c.head_dim, width = c.fused_v ? (hq + 2 * hkv) * c.head_dim : kv_cols,
                v_col = width - kv_cols;
  std::vector<float> v_rows(size_t(n * width), NAN);
  for (int64_t t = 0; t < n; ++t) std::copy_n(v.data() + t * kv_cols, kv_cols, v_rows.data() + t * width + v_col);
  Buffer qb(q.size(), bf16), kb(k.size(), bf16), vb(v_rows.size(), bf16), dob(d_o.size(), bf16), ob(q.size(), bf16),
      dqb(q.size(), bf16), dkb(k.size(), bf16), dvb(v_rows.size(), bf16), lse(size_t(n * hq), false);
  qb.put(q), kb.put(k), vb.put(v_rows), dob.put(d_o);
  const size_t v_at = size_t(v_col) * (bf16 ? 2 : 4);
  void* v_data = static_cast<char*>(vb.data) + v_at;
  void* dv_data = static_cast<char*>(dvb.data) + v_at;
  const int64_t stride = c.fused_v ? width : 0;
  int32_t max_len = 0;
  for (int32_t len : c.lengths) max_len = std::max(max_len, len);
  const VarlenBatch b{cu.data(), int32_t(c.lengths.size()), max_len + c.extra_max_seqlen, n,
                      c.hidden.empty() ? nullptr : c.hidden.data()};
  const AttentionShape s{hq, hkv, c.head_dim};
  const Elem t = bf16 ? Elem::BF16 : Elem::F32;
  const Path path = run == Run::Bf16Mma ? Path::Mma : run == Run::Bf16MmaWide ? Path::MmaWide : Path::Fma;
  const size_t ws_bytes = backward_workspace_bytes(s, b);
  Buffer ws(ws_bytes / 4, false);
  forward(qb.data, kb.data, v_data, t, s, b, ob.data, lse.as<float>(), nullptr, path, stride);
  backward(qb.data, kb.data, v_data, ob.data, dob.data, lse.as<float>(), t, s, b, dqb.data, dkb.data, dv_data,
           ws.data, ws_bytes, nullptr, path, stride, stride);
  const std::vector<float> dv_rows = dvb.get();
  std::vector<float> dv(v.size());
  for (int64_t t = 0; t < n; ++t) {
    std::copy_n(dv_rows.data() + t * width + v_col, kv_cols, dv.data() + t * kv_cols);
    for (int64_t i = 0; i < v_col; ++i) EXPECT_TRUE(std::isnan(dv_rows[t * width + i])) << c.name << ": dv wrote outside its columns";
  }
  return {ob.get(), lse.get(), dqb.get(), dkb.get(), dv};
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

// Returns the outputs it checked.
Outputs check(const Case& c, Run run) {
  const int64_t D = c.head_dim;
  const bool bf16 = run != Run::Fp32Fma;
  const Inputs in = inputs_of(c, bf16);
  const Outputs got = run_kernels(c, run, in.q, in.k, in.v, in.d_o);
  const char* name = run == Run::Fp32Fma   ? "fp32 fma"
                     : run == Run::Bf16Fma ? "bf16 fma"
                     : run == Run::Bf16Mma ? "bf16 mma"
                                           : "bf16 mma wide";
  expect_close(c.name + " " + name + " vs fp64", got,
               testing::exact_attention_hidden(in.q, in.k, in.v, in.d_o, c.lengths, c.hidden, c.heads, c.kv_heads, D),
               bf16 ? 1e-2 : 1e-5);
  if (run != Run::Fp32Fma) return got;
  // fp32: the kernels compute what the tiling's CPU emulation computes.
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t n = cu.back();
  Outputs emu{std::vector<float>(n * c.heads * D), std::vector<float>(n * c.heads), std::vector<float>(n * c.heads * D),
              std::vector<float>(n * c.kv_heads * D), std::vector<float>(n * c.kv_heads * D)};
  const AttentionShape s{c.heads, c.kv_heads, D};
  attention_tiled_forward(in.q.data(), in.k.data(), in.v.data(), s, cu, c.hidden, emu.o.data(), emu.lse.data());
  attention_tiled_backward(in.q.data(), in.k.data(), in.v.data(), emu.o.data(), in.d_o.data(), emu.lse.data(), s, cu,
                           c.hidden,
                           emu.dq.data(), emu.dk.data(), emu.dv.data());
  expect_close(c.name + " fp32 fma vs emulation", got, emu, 1e-6);
  return got;
}

const Case kFixtureDim{"d12_gqa2_fixture", {17, 64, 3, 70}, 6, 3, 12};  // tests/fixtures/qwen3_rm_tiny's heads
const Case kDim64{"d64_gqa2_ragged", {1, 64, 65, 17}, 4, 2, 64, 7};
const Case kDim128{"d128_gqa4_edges", {130, 63, 1}, 4, 1, 128};
const Case kDim128Mha{"d128_mha_129", {129}, 1, 1, 128};
// v and dv inside fused [q | k | v] rows, as the model's fused projection lays them out.
const Case kFixtureDimFusedV{"d12_gqa2_fused_v", {17, 64, 3, 70}, 6, 3, 12, 0, true};
const Case kDim128FusedV{"d128_gqa4_fused_v", {130, 63, 1}, 4, 1, 128, 0, true};
// Shared-prompt pairs [shared | chosen rest | rejected rest] (hidden spans; plain sequences between them):
// spans inside a tile, across tile edges, a one-token shared prompt, and a one-token chosen rest.
const Case kFixtureDimShared{"d12_gqa2_shared", {40, 9, 200, 70, 3}, 6, 3, 12, 0, false, {10, 25, 0, 0, 60, 140, 1, 35, 1, 2}};
const Case kDim128Shared{"d128_gqa4_shared", {200, 130}, 4, 1, 128, 0, true, {64, 129, 30, 100}};

TEST(AttentionEmulated, FmaPathInFp32) {
  check(kFixtureDim, Run::Fp32Fma);
  check(kDim64, Run::Fp32Fma);
  check(kFixtureDimFusedV, Run::Fp32Fma);
  check(kFixtureDimShared, Run::Fp32Fma);
}

TEST(AttentionEmulated, FmaPathInBf16) {
  check(kFixtureDim, Run::Bf16Fma);
  check(kDim128, Run::Bf16Fma);
  check(kFixtureDimShared, Run::Bf16Fma);
}

TEST(AttentionEmulated, TensorCorePathAtHeadDim64) { check(kDim64, Run::Bf16Mma); }

TEST(AttentionEmulated, TensorCorePathAtHeadDim128) {
  check(kDim128, Run::Bf16Mma);
  check(kDim128Mha, Run::Bf16Mma);
  check(kDim128FusedV, Run::Bf16Mma);
  check(kDim128Shared, Run::Bf16Mma);
  // Path::Mma reached the tensor-core kernels: the two paths sum in different orders, so equal outputs
  // would mean one path ran twice.
  const Inputs in = inputs_of(kDim128, true);
  EXPECT_NE(run_kernels(kDim128, Run::Bf16Mma, in.q, in.k, in.v, in.d_o).o,
            run_kernels(kDim128, Run::Bf16Fma, in.q, in.k, in.v, in.d_o).o);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Sequences that fill the wide kernels' 128-row (128-key) blocks in every way: blocks with all 4 (8) warps and
// the second diagonal key tile (skipped by warps 0 and 1), a last block of 1 row (3 of 4, 6 of 8 warps past the
// end), one of 17 rows (its one live warp holds 1 row of its second 16-row tile), and shared-prompt spans across
// a block edge.
const Case kDim128Wide{"d128_gqa2_wide_blocks", {145, 129, 5}, 4, 2, 128};
const Case kDim128WideShared{"d128_gqa4_wide_shared", {260, 40}, 4, 1, 128, 9, true, {100, 150, 1, 20}};
// The schedules' case (EveryScheduleGivesTheSameBits): a full block with the skipped diagonal tile, a short
// last one, a span across the diagonal, at half kDim128WideShared's cost.
const Case kDim128WideSmall{"d128_wide_shared_small", {140}, 2, 1, 128, 0, false, {60, 100}};

// The wide path (Path::MmaWide: the forward at 32 query rows a warp, dK/dV in 8-warp 128-key blocks with P^T and
// dS^T through shared memory) sums each element as the tensor-core path does: the same bits in o, lse, dq, dk
// and dv. The cases the tests above do not check against the exact attention are checked here (within bf16's
// bound).
TEST(AttentionEmulated, WidePathGivesTheBitsOfTheTensorCorePath) {
  for (const Case* c : {&kDim64, &kDim128FusedV, &kDim128Shared, &kDim128Wide, &kDim128WideShared}) {
    const Inputs in = inputs_of(*c, true);
    const Outputs wide = c == &kDim128Wide || c == &kDim128WideShared
                             ? check(*c, Run::Bf16MmaWide)
                             : run_kernels(*c, Run::Bf16MmaWide, in.q, in.k, in.v, in.d_o);
    const Outputs mma = run_kernels(*c, Run::Bf16Mma, in.q, in.k, in.v, in.d_o);
    EXPECT_TRUE(same_bits(wide.o, mma.o)) << c->name << ": o";
    EXPECT_TRUE(same_bits(wide.lse, mma.lse)) << c->name << ": lse";
    EXPECT_TRUE(same_bits(wide.dq, mma.dq) && same_bits(wide.dk, mma.dk) && same_bits(wide.dv, mma.dv)) << c->name;
  }
}

// ZERO_SIMT_SCHEDULE as ctest's entry sets it ("" for the default order).
std::string schedule_name() {
  const char* s = std::getenv("ZERO_SIMT_SCHEDULE");
  return s == nullptr ? "" : s;
}
bool random_schedule() { return schedule_name().rfind("random:", 0) == 0; }

// The same bits whatever the order of the threads between barriers and of the blocks: every sum has one fixed
// order (no atomics, no reduction whose order follows the schedule), so two runs on a GPU are bit-identical.
// A race the tolerance checks above would let pass (a sum in another order) fails here. The outputs of each
// path under the default order against those under the emulator's other schedules, in this one process.
struct CaseRun {
  const Case& c;
  Run run;
};
TEST(AttentionEmulated, EveryScheduleGivesTheSameBits) {
  if (!schedule_name().empty()) GTEST_SKIP() << "runs in the default entry alone: it tries every schedule itself";
  const CaseRun paths[] = {{kFixtureDimShared, Run::Fp32Fma}, {kDim64, Run::Bf16Fma}, {kDim128Shared, Run::Bf16Mma},
                           {kDim64, Run::Bf16Mma}, {kDim128WideSmall, Run::Bf16MmaWide}};
  const char* schedules[] = {"reverse", "ahead", "random:1", "random:2", "random:3"};
  for (const CaseRun& p : paths) {
    const Inputs in = inputs_of(p.c, p.run != Run::Fp32Fma);
    simt::use_schedule("");
    const Outputs want = run_kernels(p.c, p.run, in.q, in.k, in.v, in.d_o);
    for (const char* schedule : schedules) {
      simt::use_schedule(schedule);
      const Outputs got = run_kernels(p.c, p.run, in.q, in.k, in.v, in.d_o);
      const std::string what = p.c.name + " run " + std::to_string(int(p.run)) + " under " + schedule;
      EXPECT_TRUE(same_bits(got.o, want.o)) << what << ": o";
      EXPECT_TRUE(same_bits(got.lse, want.lse)) << what << ": lse";
      EXPECT_TRUE(same_bits(got.dq, want.dq)) << what << ": dq";
      EXPECT_TRUE(same_bits(got.dk, want.dk)) << what << ": dk";
      EXPECT_TRUE(same_bits(got.dv, want.dv)) << what << ": dv";
    }
  }
  simt::use_schedule("");  // the rest of this binary in the default entry's order
}

TEST(SimtEmulator, AScheduleNameIsCheckedWhereverItComesFrom) {
  EXPECT_THROW(simt::use_schedule("random:"), std::invalid_argument);
  EXPECT_THROW(simt::use_schedule("random:-1"), std::invalid_argument);
  EXPECT_THROW(simt::use_schedule("backwards"), std::invalid_argument);
  simt::use_schedule(schedule_name().c_str());
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
// A race: each thread reads its lower neighbour's slot with no barrier after the writes. Which reads see
// an unwritten slot (NaN, as the emulator fills shared memory) depends on the schedule. Block b's reads go
// to out[64 b + t].
void missing_barrier_kernel(float* out) {
  float* sh = reinterpret_cast<float*>(kernels::dynamic_shared());
  __syncthreads();
  sh[threadIdx.x] = float(threadIdx.x);
  out[blockIdx.x * 64 + threadIdx.x] = sh[(threadIdx.x + 63) % 64];
  __syncthreads();
}
// Two block-wide rounds through shared memory with only a warp-level step between them (the shape of
// group_sum called twice, without its first __syncthreads): warp 0's second write can land before warp 1
// has read the first round.
void warp_ahead_kernel(float* out) {
  float* sh = reinterpret_cast<float*>(kernels::dynamic_shared());
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sh[warp] = 1.0f + float(warp);
  __syncthreads();
  out[threadIdx.x] = sh[0] + sh[1];
  __syncwarp();  // a __syncthreads belongs here
  if (lane == 0) sh[warp] = 10.0f + float(warp);
  __syncthreads();
}
// A copy into shared memory (thread 32's cp.async) racing every thread's read of it, before the copier's wait.
void copy_race_kernel(const float* src, float* out) {
  float* sh = reinterpret_cast<float*>(kernels::dynamic_shared());
  if (threadIdx.x < 4) sh[threadIdx.x] = -1.0f;
  __syncthreads();
  if (threadIdx.x == 32) simt::cp_async16(sh, src, true);
  simt::cp_async_commit();
  out[threadIdx.x] = sh[0];
  simt::cp_async_wait(0);
  __syncthreads();
}
// Block b marks itself done in written[b] and reads whether block b - 1 had (seen[b]; block 0 sees 1).
void chained_blocks_kernel(float* written, float* seen) {
  if (threadIdx.x != 0) return;
  seen[blockIdx.x] = blockIdx.x == 0 ? 1.0f : written[blockIdx.x - 1];
  written[blockIdx.x] = 1.0f;
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

// ldmatrix m8n8 x4 as the PTX ISA deals it: lane 8 i + j addresses row j of matrix i; lane l's register i
// holds matrix i's elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1), with .trans (2 (l % 4), l / 4) and
// (2 (l % 4) + 1, l / 4), the first in the low half. Matrix i here: element (r, c) = 1000 i + 10 r + c, each
// row its own 16 bytes of a 4 x 8 x 8 array.
void ldmatrix_kernel(const uint16_t* m, uint32_t* out, bool trans) {
  uint32_t r[4];
  simt::ldmatrix_x4(r, m + threadIdx.x * 8, trans);
  for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = r[i];
}
TEST(SimtEmulator, LdmatrixDealsTheRowsAsThePtxIsaSays) {
  std::vector<uint16_t> m(4 * 64);
  for (int i = 0; i < 4; ++i)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) m[i * 64 + r * 8 + c] = uint16_t(1000 * i + 10 * r + c);
  for (bool trans : {false, true}) {
    std::vector<uint32_t> out(32 * 4);
    simt::launch(1, 32, 0, ldmatrix_kernel, static_cast<const uint16_t*>(m.data()), out.data(), trans);
    // Spot checks written out: lane 0, lane 5 (row 1, columns 2 and 3), lane 31 (row 7, columns 6 and 7).
    EXPECT_EQ(out[0 * 4 + 0], trans ? (10u << 16 | 0u) : (1u << 16 | 0u));
    EXPECT_EQ(out[5 * 4 + 2], trans ? (2000u + 31u) << 16 | (2000u + 21u) : (2000u + 13u) << 16 | (2000u + 12u));
    EXPECT_EQ(out[31 * 4 + 3], trans ? (3000u + 77u) << 16 | (3000u + 67u) : (3000u + 77u) << 16 | (3000u + 76u));
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < 4; ++i) {
        const int g = l / 4, p = 2 * (l % 4);
        const uint32_t lo = trans ? 1000 * i + 10 * p + g : 1000 * i + 10 * g + p;
        const uint32_t hi = trans ? 1000 * i + 10 * (p + 1) + g : 1000 * i + 10 * g + p + 1;
        EXPECT_EQ(out[l * 4 + i], hi << 16 | lo) << "lane " << l << " register " << i << (trans ? " trans" : "");
      }
  }
}

// ldmatrix is one instruction of the whole warp: its loads are done before any lane goes on, so a lane that
// overwrites the row it addressed right after it takes nothing from any lane's registers.
void ldmatrix_then_overwrite_kernel(uint16_t* m, uint32_t* out) {
  uint32_t r[4];
  simt::ldmatrix_x4(r, m + threadIdx.x * 8, false);
  for (int c = 0; c < 8; ++c) m[threadIdx.x * 8 + c] = 0xffff;
  for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = r[i];
}
TEST(SimtEmulator, LdmatrixLoadsEveryRowBeforeAnyLaneGoesOn) {
  std::vector<uint16_t> m(4 * 64);
  for (int i = 0; i < 4 * 64; ++i) m[i] = uint16_t(i);
  std::vector<uint32_t> out(32 * 4);
  simt::launch(1, 32, 0, ldmatrix_then_overwrite_kernel, m.data(), out.data());
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = 64 * i + 8 * (l / 4) + 2 * (l % 4);  // matrix i, row l / 4, column 2 (l % 4)
      EXPECT_EQ(out[l * 4 + i], (lo + 1) << 16 | lo) << "lane " << l << " register " << i;
    }
}

// Shuffles one after another (their staging alternates between two buffers): each gets its own round's values.
void shuffle_rounds_kernel(float* out) {
  for (int round = 0; round < 6; ++round)
    out[round * 32 + threadIdx.x] = __shfl_xor_sync(0xffffffffu, float(100 * round + threadIdx.x), 1 << (round % 5));
}
TEST(SimtEmulator, ShufflesInARowEachTakeTheirOwnRound) {
  std::vector<float> out(6 * 32, NAN);
  simt::launch(1, 32, 0, shuffle_rounds_kernel, out.data());
  for (int round = 0; round < 6; ++round)
    for (int l = 0; l < 32; ++l)
      EXPECT_EQ(out[round * 32 + l], float(100 * round + (l ^ (1 << (round % 5))))) << "round " << round << " lane " << l;
}

// The default and reverse schedules (simt_emulator.h) see the race from opposite sides: by default (and in
// ZERO_SIMT_SCHEDULE=ahead, which orders a block-wide barrier's release the same way) only thread 63 (the
// last to reach the first barrier, so the first past it) reads before its neighbour wrote; highest first
// (ZERO_SIMT_SCHEDULE=reverse, the _reverse ctest entries) every thread but 0 does.
TEST(SimtEmulator, EachScheduleSeesAMissingBarrierFromItsSide) {
  std::vector<float> out(64, 0.0f);
  simt::launch(1, 64, 64 * sizeof(float), missing_barrier_kernel, out.data());
  const bool reverse = schedule_name() == "reverse";
  for (int t = 0; t < 64; ++t) {
    const bool unwritten = std::isnan(out[t]);
    if (!random_schedule()) {  // random: any pattern (RandomScheduleDrawsAnOrderPerBlock)
      EXPECT_EQ(unwritten, reverse ? t != 0 : t == 63) << "thread " << t << (reverse ? " (reverse)" : "");
    }
    if (!unwritten) {
      EXPECT_EQ(out[t], float((t + 63) % 64));
    }
  }
}

// Every schedule gives a block the same order whatever ran before it (a fixed one; random: drawn from the seed
// and the block's index), so a launch repeats its bits. Random draws another order for each block: thread t
// reads its neighbour's slot unwritten when t - 1 runs after it, in a pattern of its own: a lane's neighbour
// in its warp half the time (their lanes' order), and one of the two reads across the warps (their order).
TEST(SimtEmulator, RandomScheduleDrawsAnOrderPerBlock) {
  constexpr int kBlocks = 64;
  std::vector<float> out(kBlocks * 64, 0.0f), again(kBlocks * 64, 0.0f);
  simt::launch(kBlocks, 64, 64 * sizeof(float), missing_barrier_kernel, out.data());
  simt::launch(kBlocks, 64, 64 * sizeof(float), missing_barrier_kernel, again.data());
  std::set<std::vector<bool>> patterns;
  int unwritten_reads = 0;
  for (int b = 0; b < kBlocks; ++b) {
    std::vector<bool> pattern(64);
    for (int t = 0; t < 64; ++t) {
      const float v = out[b * 64 + t];
      pattern[t] = std::isnan(v);
      unwritten_reads += pattern[t] ? 1 : 0;
      if (!pattern[t]) {
        EXPECT_EQ(v, float((t + 63) % 64)) << "block " << b << " thread " << t;
      }
      EXPECT_EQ(std::isnan(again[b * 64 + t]), pattern[t]) << "a second launch, block " << b << " thread " << t;
    }
    patterns.insert(pattern);
  }
  if (random_schedule()) {
    EXPECT_EQ(patterns.size(), size_t(kBlocks)) << "blocks that drew the same order";
    // 64 blocks of 62 reads in a warp, each unwritten with probability 1/2, and 1 of the 2 across: 2048 +- 31.5
    // (one standard deviation).
    EXPECT_GT(unwritten_reads, 1800);
    EXPECT_LT(unwritten_reads, 2300);
  } else {
    EXPECT_EQ(patterns.size(), size_t(1)) << schedule_name() << ": the same order in every block";
  }
}

// Only ZERO_SIMT_SCHEDULE=ahead (the _ahead ctest entries) lets warp 0, once through its __syncwarp, run on
// to its second write before warp 1's threads (after 63, the first past the barrier) read: they see 10 + 2. In
// the other two every thread past the barrier reads before any warp's __syncwarp lets it go on.
TEST(SimtEmulator, AheadLetsAWarpRunPastTheBlocksOtherWarps) {
  std::vector<float> out(64, NAN);
  simt::launch(1, 64, 2 * sizeof(float), warp_ahead_kernel, out.data());
  const bool ahead = schedule_name() == "ahead";
  if (random_schedule()) {  // the warp drawn first runs through its second write: the other warp reads 12
    EXPECT_EQ(std::count(out.begin(), out.begin() + 32, 3.0f) + std::count(out.begin() + 32, out.end(), 12.0f) == 64 ||
                  std::count(out.begin(), out.begin() + 32, 12.0f) + std::count(out.begin() + 32, out.end(), 3.0f) == 64,
              true)
        << "thread 0 read " << out[0] << ", thread 32 " << out[32];
    return;
  }
  for (int t = 0; t < 64; ++t) {
    const bool overtaken = ahead && t >= 32 && t < 63;
    EXPECT_EQ(out[t], overtaken ? 12.0f : 3.0f) << "thread " << t << (ahead ? " (ahead)" : "");
  }
}

// A cp.async lands at its thread's wait in the default and reverse schedules (the copier itself reads the old
// value before its wait), at its commit in ahead (the copier reads its own copy). Past the barrier, thread 63
// runs first, then 0, 1, ... in the default and ahead orders, 63, 62, ... in reverse.
TEST(SimtEmulator, AheadLandsACopyAtItsCommit) {
  alignas(16) const float src[4] = {7.0f, 7.0f, 7.0f, 7.0f};
  std::vector<float> out(64, NAN);
  simt::launch(1, 64, 4 * sizeof(float), copy_race_kernel, src, out.data());
  const std::string schedule = schedule_name();
  for (int t = 0; t < 64; ++t) {
    bool copied;  // the read saw thread 32's copy
    if (random_schedule()) copied = out[t] == 7.0f;  // either, as the draws fall
    else if (schedule == "reverse") copied = t < 32;
    else copied = (t > 32 && t < 63) || (t == 32 && schedule == "ahead");
    EXPECT_EQ(out[t], copied ? 7.0f : -1.0f) << "thread " << t << " (" << schedule << ")";
  }
}

// The blocks of a grid run in index order by default (and ahead), highest first in reverse, in a random order
// in random: block b sees its predecessor not yet done when b - 1 runs after it.
TEST(SimtEmulator, BlocksRunInTheSchedulesOrder) {
  constexpr int kBlocks = 64;
  std::vector<float> written(kBlocks, 0.0f), seen(kBlocks, NAN);
  simt::launch(kBlocks, 32, 0, chained_blocks_kernel, written.data(), seen.data());
  const std::string schedule = schedule_name();
  EXPECT_EQ(seen[0], 1.0f);
  int unwritten = 0;
  for (int b = 1; b < kBlocks; ++b) {
    EXPECT_EQ(written[b], 1.0f) << "block " << b << " did not run";
    unwritten += seen[b] == 0.0f ? 1 : 0;
    if (schedule == "reverse") {
      EXPECT_EQ(seen[b], 0.0f) << "block " << b;
    } else if (!random_schedule()) {
      EXPECT_EQ(seen[b], 1.0f) << "block " << b;
    }
  }
  if (random_schedule()) {  // each of the 63 reads unwritten with probability 1/2: 31.5 +- 4
    EXPECT_GT(unwritten, 10);
    EXPECT_LT(unwritten, 54);
  }
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
