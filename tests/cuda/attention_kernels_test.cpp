// The CUDA attention kernels (model/cuda/attention_kernels.h) on a GPU against
//   - plain causal GQA attention in fp64 written here from the definitions (one query row at a time on
//     the token-major arrays; shares nothing with the kernels or the emulation): relative L2 error
//     ||gpu - exact|| / ||exact|| per tensor (o, lse, dq, dk, dv) <= 1e-5 in fp32, <= 1e-2 in bf16 (the
//     exact attention of the bf16-rounded inputs, so the bound measures the kernels' fp32 math and the
//     bf16 rounding of their outputs, o included as backward reads it). For scale: the CPU emulation on
//     these cases measures 1.3-4.5e-7 in fp32 and, with the same bf16 roundings applied on the host,
//     1.5e-3 (o) to 2.1e-3 (dk) in bf16;
//   - the CPU emulation of the same tiling (model/attention_tiled.h) in fp32: <= 1e-6 (same sums in the
//     same order; only exp/log and fused multiply-adds may round differently);
//   - themselves: two runs bit-identical (no atomics; fixed summation order).
// bf16 runs on both paths (attention_kernels.h): Fma for every case, Mma (tensor cores) for the cases at
// head_dim 64 and 128, the same 1e-2 bound against the exact attention; Auto must pick Mma there.
// Ragged batches with lengths 0 to 2048 (tile edges 63/64/65/127/128/129; 2048 at head_dim 16 and 128), GQA
// ratios 1/2/3/4/8, head_dim 8/12/16/40/64/128, max_seqlen equal to and above the longest sequence. Every
// error is printed, so a GPU session can see which tensor of which case is off and by how much. Skips
// without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "model/attention_tiled.h"
#include "model/cuda/attention_kernels.h"
#include "tests/common/exact_attention.h"
#include "tests/cuda/cuda_test_util.h"

namespace zero::model {
namespace {

namespace ca = cuda_attention;
using testing::cu_seqlens_of;
using testing::DeviceBuffer;
using testing::rel_l2;

struct Case {
  std::string name;
  std::vector<int32_t> lengths;
  int64_t heads, kv_heads, head_dim;
  int32_t extra_max_seqlen = 0;  // VarlenBatch.max_seqlen above the longest length
  bool fused_v = false;  // v and dv as the last columns of [q | k | v] rows (the fused projection's layout)
  std::vector<int32_t> hidden = {};  // begin, end per sequence (shared-prompt pairs), or empty
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"edges_r1_d8", {1, 63, 64, 65, 0, 127, 128, 129, 2}, 2, 2, 8},
      {"gqa2_d16", {129, 1, 64, 200}, 4, 2, 16, 37},
      {"fixture_gqa2_d12", {17, 64, 3, 70}, 6, 3, 12},  // tests/fixtures/qwen3_rm_tiny's heads
      {"gqa3_d40", {70, 33, 5}, 3, 1, 40},
      {"gqa4_d64", {65, 127, 300}, 8, 2, 64},
      {"gqa8_d128", {63, 128, 190, 1}, 8, 1, 128},
      {"long_2048_d16", {2048, 5}, 2, 1, 16},
      {"r1_d128_1000", {1000, 64}, 2, 2, 128, 64},
      {"long_2048_gqa4_d128", {2048, 1, 130}, 4, 1, 128},  // Qwen3's head_dim at the longest length
      {"fused_v_fixture_d12", {17, 64, 3, 70}, 6, 3, 12, 0, true},
      {"fused_v_gqa4_d128", {513, 63, 1}, 4, 1, 128, 0, true},
      // shared-prompt pairs [shared | chosen rest | rejected rest] between plain sequences
      {"shared_fixture_d12", {40, 9, 200, 70, 3}, 6, 3, 12, 0, false, {10, 25, 0, 0, 60, 140, 1, 35, 1, 2}},
      {"shared_gqa4_d128", {700, 130, 64}, 4, 1, 128, 0, true, {300, 520, 64, 129, 0, 0}},
  };
  return all;
}

struct Host {  // token-major, as attention_kernels.h lays them out
  std::vector<float> q, k, v, d_o;
};
struct Outputs {
  std::vector<float> o, lse, dq, dk, dv;
};

float round_bf16(float x) { return math::bf16_to_f32(math::f32_to_bf16(x)); }

// q from [-3, 3) (peaked softmax rows, the running max moves), k, v, dO from [-1, 1); rounded to bf16
// when the kernels store bf16, so the exact reference sees what the kernels see.
Host random_inputs(const Case& c, int64_t n, bool bf16, uint64_t seed) {
  uint64_t state = seed;
  auto draw = [&](int64_t count, float spread) {
    std::vector<float> x(count);
    for (float& e : x) {
      e = spread * (float(splitmix64(state) >> 40) * 0x1p-23f - 1.0f);
      if (bf16) e = round_bf16(e);
    }
    return x;
  };
  Host h;
  h.q = draw(n * c.heads * c.head_dim, 3.0f);
  h.k = draw(n * c.kv_heads * c.head_dim, 1.0f);
  h.v = draw(n * c.kv_heads * c.head_dim, 1.0f);
  h.d_o = draw(n * c.heads * c.head_dim, 1.0f);
  return h;
}

// Device storage of one element type, from / to fp32 host vectors.
struct Typed {
  bool bf16;
  size_t elem() const { return bf16 ? 2 : 4; }
  DeviceBuffer make(size_t count) const { return DeviceBuffer(count * elem()); }
  void put(const DeviceBuffer& d, const std::vector<float>& x) const {
    if (!bf16) return testing::upload(d.get(), x.data(), x.size());
    std::vector<uint16_t> b(x.size());
    for (size_t i = 0; i < x.size(); ++i) b[i] = math::f32_to_bf16(x[i]);
    testing::upload(d.get(), b.data(), b.size());
  }
  std::vector<float> get(const DeviceBuffer& d, size_t count) const {
    if (!bf16) return testing::download<float>(d.get(), count);
    const auto b = testing::download<uint16_t>(d.get(), count);
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = math::bf16_to_f32(b[i]);
    return x;
  }
};

Outputs run_gpu(const Case& c, const Host& in, bool bf16, ca::Path path = ca::Path::Auto) {
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t n = cu.back(), d = c.head_dim;
  const Typed t{bf16};
  DeviceBuffer cu_d(cu.size() * sizeof(int32_t)), hidden_d(std::max<size_t>(1, c.hidden.size()) * sizeof(int32_t));
  cu_d.upload(cu);
  if (!c.hidden.empty()) hidden_d.upload(c.hidden);
  // v (and dv) in rows `width` wide from column v_col: packed, or the [q | k | v] rows of the fused
  // projection (the columns before v NaN, and for dv checked untouched).
  const int64_t kv_cols = c.kv_heads * d, width = c.fused_v ? (c.heads + 2 * c.kv_heads) * d : kv_cols,
                v_col = width - kv_cols;
  std::vector<float> v_rows(size_t(n * width), NAN);
  for (int64_t i = 0; i < n; ++i) std::copy_n(in.v.data() + i * kv_cols, kv_cols, v_rows.data() + i * width + v_col);
  DeviceBuffer q = t.make(in.q.size()), k = t.make(in.k.size()), v = t.make(v_rows.size()), d_o = t.make(in.d_o.size());
  t.put(q, in.q), t.put(k, in.k), t.put(v, v_rows), t.put(d_o, in.d_o);
  DeviceBuffer o = t.make(n * c.heads * d), lse(n * c.heads * sizeof(float));
  DeviceBuffer dq = t.make(n * c.heads * d), dk = t.make(n * c.kv_heads * d), dv = t.make(v_rows.size());
  const int64_t stride = c.fused_v ? width : 0;
  void* v_at = static_cast<char*>(v.get()) + v_col * t.elem();
  void* dv_at = static_cast<char*>(dv.get()) + v_col * t.elem();
  const AttentionShape s{c.heads, c.kv_heads, d};
  const int32_t max_len = *std::max_element(c.lengths.begin(), c.lengths.end()) + c.extra_max_seqlen;
  const ca::VarlenBatch b{cu_d.as<int32_t>(), int32_t(c.lengths.size()), max_len, n,
                          c.hidden.empty() ? nullptr : hidden_d.as<int32_t>()};
  const ca::Elem e = bf16 ? ca::Elem::BF16 : ca::Elem::F32;
  const size_t ws_bytes = ca::backward_workspace_bytes(s, b);
  DeviceBuffer ws(ws_bytes);
  // Outputs start as NaN bytes (0xff), so an element a kernel forgets to write shows up.
  for (const DeviceBuffer* x : {&o, &lse, &dq, &dk, &dv}) CUDA_CHECK(cudaMemset(x->get(), 0xff, x->bytes()));

  ca::forward(q.get(), k.get(), v_at, e, s, b, o.get(), lse.as<float>(), nullptr, path, stride);
  ca::backward(q.get(), k.get(), v_at, o.get(), d_o.get(), lse.as<float>(), e, s, b, dq.get(), dk.get(), dv_at,
               ws.get(), ws_bytes, nullptr, path, stride, stride);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> dv_rows = t.get(dv, v_rows.size());
  std::vector<float> dv_packed(size_t(n * kv_cols));
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(dv_rows.data() + i * width + v_col, kv_cols, dv_packed.data() + i * kv_cols);
    for (int64_t j = 0; j < v_col; ++j) EXPECT_TRUE(std::isnan(dv_rows[i * width + j])) << c.name << ": dv wrote outside its columns";
  }
  return {t.get(o, n * c.heads * d), testing::download<float>(lse.get(), n * c.heads), t.get(dq, n * c.heads * d),
          t.get(dk, n * c.kv_heads * d), dv_packed};
}

// fp64 plain attention (tests/common/exact_attention.h; shared-prompt pairs as their answers apart).
testing::ExactAttention run_exact(const Case& c, const Host& in) {
  return testing::exact_attention_hidden(in.q, in.k, in.v, in.d_o, c.lengths, c.hidden, c.heads, c.kv_heads,
                                         c.head_dim);
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Per tensor: name, error; prints one line per case so a GPU log shows every number.
template <class Want>
void expect_close(const std::string& what, const Outputs& got, const Want& want, double tol) {
  const std::pair<const char*, double> errs[] = {{"o", rel_l2(got.o, want.o)},    {"lse", rel_l2(got.lse, want.lse)},
                                                 {"dq", rel_l2(got.dq, want.dq)}, {"dk", rel_l2(got.dk, want.dk)},
                                                 {"dv", rel_l2(got.dv, want.dv)}};
  std::printf("  %-40s", what.c_str());
  for (const auto& [name, err] : errs) std::printf(" %s %.2e", name, err);
  std::printf("  (bound %.0e)\n", tol);
  for (const auto& [name, err] : errs) EXPECT_LE(err, tol) << what << ": " << name;
}

// What a run stores and which kernels it asks for.
struct Variant {
  bool bf16;
  ca::Path path;
  const char* name;
};
// The cases a variant runs: the tensor-core path only where it applies.
bool runs(const Variant& v, const Case& c) {
  return (v.path != ca::Path::Mma && v.path != ca::Path::MmaWide) ||
         ca::mma_supported(ca::Elem::BF16, {c.heads, c.kv_heads, c.head_dim});
}

class AttentionKernels : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override { ZERO_SKIP_WITHOUT_CUDA(); }
};
// Unparameterised tests (a skipped parameterised instance would make ctest report the whole binary skipped).
class AttentionKernelsOnDevice : public ::testing::Test {
 protected:
  void SetUp() override { ZERO_SKIP_WITHOUT_CUDA(); }
};

TEST_P(AttentionKernels, MatchExactAttention) {
  const Variant var = GetParam();
  int ran = 0;
  for (const Case& c : cases()) {
    if (!runs(var, c)) continue;
    const int64_t n = cu_seqlens_of(c.lengths).back();
    const Host in = random_inputs(c, n, var.bf16, 0xa77e + c.head_dim);
    const Outputs got = run_gpu(c, in, var.bf16, var.path);
    // The bf16 variants share their inputs (the same seed, rounded alike): one fp64 reference for all of them.
    static std::map<std::pair<std::string, bool>, testing::ExactAttention> exact;
    auto it = exact.find({c.name, var.bf16});
    if (it == exact.end()) it = exact.emplace(std::make_pair(c.name, var.bf16), run_exact(c, in)).first;
    expect_close(c.name + " " + var.name + " vs fp64", got, it->second, var.bf16 ? 1e-2 : 1e-5);
    ++ran;
  }
  EXPECT_GE(ran, 3) << "too few cases for " << var.name;
}

// Auto is the tensor-core path wherever that applies: the same bits as asking for it.
TEST_F(AttentionKernelsOnDevice, AutoTakesTheTensorCorePathForBf16AtHeadDim128) {
  const Case& c = cases()[5];  // gqa8_d128
  ASSERT_EQ(c.head_dim, 128);
  const int64_t n = cu_seqlens_of(c.lengths).back();
  const Host in = random_inputs(c, n, true, 0xa070);
  const Outputs autop = run_gpu(c, in, true), mma = run_gpu(c, in, true, ca::Path::Mma),
                fma = run_gpu(c, in, true, ca::Path::Fma);
  EXPECT_EQ(autop.o, mma.o);
  EXPECT_EQ(autop.dq, mma.dq);
  EXPECT_NE(autop.o, fma.o) << "the paths sum in different orders; equal outputs mean one path ran twice";
}

// The wide path (the forward at 32 rows a warp, dK/dV in 8-warp blocks of 128 keys) sums every element as the
// tensor-core path does: the same bits, on every case the tensor cores take.
TEST_F(AttentionKernelsOnDevice, WidePathGivesTheBitsOfTheTensorCorePath) {
  int ran = 0;
  for (const Case& c : cases()) {
    if (!ca::mma_supported(ca::Elem::BF16, {c.heads, c.kv_heads, c.head_dim})) continue;
    const int64_t n = cu_seqlens_of(c.lengths).back();
    const Host in = random_inputs(c, n, true, 0x71de + c.head_dim);
    const Outputs wide = run_gpu(c, in, true, ca::Path::MmaWide), mma = run_gpu(c, in, true, ca::Path::Mma);
    EXPECT_TRUE(same_bits(wide.o, mma.o)) << c.name;
    EXPECT_TRUE(same_bits(wide.lse, mma.lse)) << c.name;
    EXPECT_TRUE(same_bits(wide.dq, mma.dq) && same_bits(wide.dk, mma.dk) && same_bits(wide.dv, mma.dv)) << c.name;
    ++ran;
  }
  EXPECT_GE(ran, 2);
}

// In fp32 the kernels compute what the emulation computes, tile by tile.
TEST_F(AttentionKernelsOnDevice, MatchTheCpuEmulation) {
  for (const Case& c : cases()) {
    const auto cu = cu_seqlens_of(c.lengths);
    const int64_t n = cu.back(), d = c.head_dim;
    const Host in = random_inputs(c, n, false, 0xe3 + c.head_dim);
    const Outputs got = run_gpu(c, in, false);
    Outputs emu{std::vector<float>(n * c.heads * d), std::vector<float>(n * c.heads), std::vector<float>(n * c.heads * d),
                std::vector<float>(n * c.kv_heads * d), std::vector<float>(n * c.kv_heads * d)};
    const AttentionShape s{c.heads, c.kv_heads, d};
    attention_tiled_forward(in.q.data(), in.k.data(), in.v.data(), s, cu, c.hidden, emu.o.data(), emu.lse.data());
    attention_tiled_backward(in.q.data(), in.k.data(), in.v.data(), emu.o.data(), in.d_o.data(), emu.lse.data(), s, cu,
                             c.hidden,
                             emu.dq.data(), emu.dk.data(), emu.dv.data());
    expect_close(c.name + " fp32 vs emulation", got, emu, 1e-6);
  }
}

TEST_P(AttentionKernels, TwoRunsAreBitIdentical) {
  const Variant var = GetParam();
  for (const Case& c : {cases()[1], cases()[4], cases()[5]}) {  // gqa2_d16, gqa4_d64, gqa8_d128
    if (!runs(var, c)) continue;
    const int64_t n = cu_seqlens_of(c.lengths).back();
    const Host in = random_inputs(c, n, var.bf16, 0xd17);
    const Outputs a = run_gpu(c, in, var.bf16, var.path), b = run_gpu(c, in, var.bf16, var.path);
    EXPECT_TRUE(same_bits(a.o, b.o)) << c.name;
    EXPECT_TRUE(same_bits(a.lse, b.lse)) << c.name;
    EXPECT_TRUE(same_bits(a.dq, b.dq)) << c.name;
    EXPECT_TRUE(same_bits(a.dk, b.dk)) << c.name;
    EXPECT_TRUE(same_bits(a.dv, b.dv)) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Elem, AttentionKernels,
                         ::testing::Values(Variant{false, ca::Path::Fma, "fp32"},
                                           Variant{true, ca::Path::Fma, "bf16_fma"},
                                           Variant{true, ca::Path::Mma, "bf16_mma"},
                                           Variant{true, ca::Path::MmaWide, "bf16_mma_wide"}),
                         [](const ::testing::TestParamInfo<Variant>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace zero::model
