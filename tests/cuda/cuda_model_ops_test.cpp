// CudaModelOps against the CPU backend (model/cpu/, the reference), op by op, on random inputs of the
// fixture's shapes and of Qwen3-4B's layer shapes (hidden 2560, 32/8 heads of 128, intermediate 9728) over a
// few hundred tokens in ragged sequences. Both backends get the same values (bf16-rounded in bf16 mode, so
// only the op's own error is measured); each output's relative L2 error over the real token rows must be
// <= 1e-5 in fp32 mode (TF32 off) and <= 1e-2 in bf16 mode. Every GPU op runs twice: the outputs must be
// bit-identical (no atomics, fixed GEMM algorithms). Each check prints its error, so a GPU session sees at
// once which op is off and by how much.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/math/bf16.h"
#include "core/splitmix.h"
#include "cuda/launch_count.h"
#include "model/cpu/cpu_model_ops.h"
#include "model/cuda/cuda_model_ops.h"
#include "model/cuda/lt_gemm.h"
#include "tests/cuda/cuda_test_util.h"

using namespace zero;
using namespace zero::model;

namespace {

struct Shape {
  const char* name;
  int64_t hidden, heads, kv_heads, head_dim, inter, vocab;
  std::vector<int32_t> seq_lens;
};
const Shape kFixture{"fixture", 64, 4, 2, 16, 160, 97, {5, 17, 9, 1, 30, 2}};
const Shape kQwen4B{"qwen3-4b", 2560, 32, 8, 128, 9728, 151936, {200, 37, 64, 3, 1, 19}};

TokenPlan make_plan(const Shape& s, uint64_t seed) {
  TokenPlan p;
  p.cu_seqlens.push_back(0);
  uint64_t st = seed;
  for (int32_t len : s.seq_lens) {
    for (int32_t j = 0; j < len; ++j) {
      // Repeated ids (a small range half the time), so the embedding backward sums several tokens per row.
      const uint64_t r = splitmix64(st);
      p.tokens.push_back(int32_t((r & 1) ? (r >> 8) % 7 : (r >> 8) % uint64_t(s.vocab)));
      p.positions.push_back(j);
    }
    p.cu_seqlens.push_back(int32_t(p.tokens.size()));
    p.pooled.push_back(p.cu_seqlens.back() - 1);
    p.max_seqlen = std::max(p.max_seqlen, len);
  }
  p.padded_tokens = (p.num_tokens() + kTokenRowMultiple - 1) / kTokenRowMultiple * kTokenRowMultiple;
  return p;
}

float round_to(float x, DType t) { return t == DType::BF16 ? math::bf16_to_f32(math::f32_to_bf16(x)) : x; }

// One tensor on both backends with the same values: fp32 on the CPU, `gpu_type` on the GPU. Token tensors
// have rows per backend (token_rows); others (weights) the same shape on both.
struct Dual {
  std::vector<float> host;
  Activation cpu, gpu;
  DType gpu_type = DType::F32;
};

class Backends {
 public:
  Backends(const Shape& s, DType act, AttentionKind attention = AttentionKind::Auto, HostWaitGuard host_wait = {})
      : shape(s), act(act), plan(make_plan(s, 7)) {
    cpu = make_cpu_model_ops();
    gpu = make_cuda_model_ops({nullptr, act, attention}, std::move(host_wait));
    cpu->begin_batch(plan, {s.head_dim, 1e6});
    gpu->begin_batch(plan, {s.head_dim, 1e6});
  }
  int64_t N() const { return plan.num_tokens(); }

  // Random values (scale * [-1, 1)), rounded to gpu_type so both sides see the same numbers.
  Dual tokens(int64_t cols, DType gpu_type, uint64_t seed, float scale = 1.0f) {
    return make({cpu->token_rows(plan), cols}, {gpu->token_rows(plan), cols}, N() * cols, gpu_type, seed, scale);
  }
  Dual weight(std::initializer_list<int64_t> shape, DType gpu_type, uint64_t seed, float scale = 1.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return make(shape, shape, n, gpu_type, seed, scale);
  }
  // Output buffers (contents undefined until an op writes them).
  Dual out_tokens(int64_t cols, DType gpu_type) { return make({cpu->token_rows(plan), cols}, {gpu->token_rows(plan), cols}, 0, gpu_type, 0, 0); }
  Dual out(std::initializer_list<int64_t> shape, DType gpu_type) { return make(shape, shape, 0, gpu_type, 0, 0); }

  // The first n elements of each side, as fp32.
  std::vector<float> cpu_values(const Dual& d, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    cpu->to_host(d.cpu, v);
    return v;
  }
  std::vector<float> gpu_values(const Dual& d, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    gpu->to_host(d.gpu, v);
    return v;
  }

  // Runs gpu_op twice (bit-identical outputs required), then compares each output's first n elements
  // with the CPU's within tol (relative L2).
  void check(const char* op, const std::function<void()>& gpu_op, std::vector<std::pair<const Dual*, int64_t>> outs,
             double tol) {
    gpu_op();
    std::vector<std::vector<float>> first;
    for (auto [d, n] : outs) first.push_back(gpu_values(*d, n));
    gpu_op();
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::vector<float> again = gpu_values(*outs[i].first, outs[i].second);
      EXPECT_EQ(0, std::memcmp(again.data(), first[i].data(), again.size() * sizeof(float)))
          << shape.name << " " << op << " output " << i << ": two runs differ";
      const std::vector<float> ref = cpu_values(*outs[i].first, outs[i].second);
      double num = 0, den = 0;
      for (size_t j = 0; j < ref.size(); ++j) {
        num += (double(first[i][j]) - ref[j]) * (double(first[i][j]) - ref[j]);
        den += double(ref[j]) * ref[j];
      }
      const double rel = std::sqrt(num / std::max(den, 1e-300));
      printf("  %-9s %-6s %-28s output %zu: rel L2 %.3e (tol %.0e)\n", shape.name, dtype_name(act), op, i, rel, tol);
      EXPECT_LE(rel, tol) << shape.name << " " << op << " output " << i;
    }
  }

  const Shape& shape;
  DType act;
  TokenPlan plan;
  std::unique_ptr<ModelOps> cpu;
  std::unique_ptr<CudaModelOps> gpu;

 private:
  Dual make(std::initializer_list<int64_t> cpu_shape, std::initializer_list<int64_t> gpu_shape, int64_t fill,
            DType gpu_type, uint64_t seed, float scale) {
    Dual d;
    d.gpu_type = gpu_type;
    d.cpu = cpu->alloc(cpu_shape);
    d.gpu = gpu->alloc(gpu_shape, gpu_type);
    // Zero everything first (token rows past N included), then the values.
    std::vector<float> zeros(size_t(d.cpu.ref().numel()), 0.0f);
    std::memcpy(d.cpu.ref().data, zeros.data(), zeros.size() * sizeof(float));
    CUDA_CHECK(cudaMemset(d.gpu.ref().data, 0, size_t(d.gpu.ref().numel()) * dtype_size(gpu_type)));
    d.host.resize(size_t(fill));
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    for (float& x : d.host) x = round_to(scale * float(double(splitmix64(st) >> 11) * 0x1.0p-52 - 1.0), gpu_type);
    if (!d.host.empty()) std::memcpy(d.cpu.ref().data, d.host.data(), d.host.size() * sizeof(float));
    if (gpu_type == DType::F32) {
      zero::testing::upload(d.gpu.ref().data, d.host.data(), d.host.size());
    } else {
      std::vector<uint16_t> bits(d.host.size());
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = math::f32_to_bf16(d.host[i]);
      zero::testing::upload(d.gpu.ref().data, bits.data(), bits.size());
    }
    return d;
  }
};

double tol_for(DType act) { return act == DType::F32 ? 1e-5 : 1e-2; }

struct Case {
  const Shape* shape;
  DType act;
};
class CudaModelOpsTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { ZERO_SKIP_WITHOUT_CUDA(); }
};

TEST_P(CudaModelOpsTest, Linear) {
  Backends b(*GetParam().shape, GetParam().act);
  const DType a = b.act, F = DType::F32;
  const int64_t H = b.shape.hidden, I = b.shape.inter, N = b.N();
  const double tol = tol_for(a);
  Dual x = b.tokens(H, a, 1), w = b.weight({I, H}, a, 2, 0.05f), y = b.out_tokens(I, a);
  b.cpu->linear_forward(x.cpu, w.cpu, y.cpu);  // the reference first: check compares against it
  b.check("linear_forward", [&] { b.gpu->linear_forward(x.gpu, w.gpu, y.gpu); }, {{&y, N * I}}, tol);
  // Into the fp32 residual stream (o_proj, down_proj): bf16 inputs, fp32 output.
  Dual m = b.tokens(I, a, 3), wd = b.weight({H, I}, a, 4, 0.05f), r = b.out_tokens(H, F);
  b.cpu->linear_forward(m.cpu, wd.cpu, r.cpu);
  b.check("linear_forward (fp32 out)", [&] { b.gpu->linear_forward(m.gpu, wd.gpu, r.gpu); }, {{&r, N * H}}, tol);
  // With the residual added: in the GEMM's epilogue on CUDA (no element-wise op runs), GEMM then add on the CPU.
  Dual res = b.tokens(H, F, 8), ra = b.out_tokens(H, F);
  b.cpu->linear_forward_add(m.cpu, wd.cpu, res.cpu, ra.cpu);
  HostStepClock clock;
  b.gpu->set_step_clock(&clock);
  b.check("linear_forward_add", [&] { b.gpu->linear_forward_add(m.gpu, wd.gpu, res.gpu, ra.gpu); }, {{&ra, N * H}}, tol);
  b.gpu->set_step_clock(nullptr);
  const StepTimes t = clock.take();
  EXPECT_EQ(t.calls_of(TimeCategory::Gemm), 2u);
  EXPECT_EQ(t.calls_of(TimeCategory::Elementwise), 0u) << "the residual add ran as its own kernel";
  // Input grads: overwrite, then accumulate (dy from the fp32 residual gradient).
  Dual dy = b.tokens(H, F, 5), dx = b.tokens(I, a, 6);
  b.cpu->linear_input_grad(dy.cpu, wd.cpu, dx.cpu, false);
  b.check("linear_input_grad", [&] { b.gpu->linear_input_grad(dy.gpu, wd.gpu, dx.gpu, false); }, {{&dx, N * I}}, tol);
  Dual acc = b.tokens(I, a, 7), acc_ref = b.tokens(I, a, 7);
  b.cpu->linear_input_grad(dy.cpu, wd.cpu, acc.cpu, true);
  // Accumulating twice would add twice: the GPU side starts from a fresh copy each run.
  b.check("linear_input_grad (accumulate)", [&] {
    CUDA_CHECK(cudaMemcpy(acc.gpu.ref().data, acc_ref.gpu.ref().data, size_t(acc.gpu.ref().numel()) * dtype_size(a),
                          cudaMemcpyDeviceToDevice));
    b.gpu->linear_input_grad(dy.gpu, wd.gpu, acc.gpu, true);
  }, {{&acc, N * I}}, tol);
  // Weight grads, into fp32 and bf16 gradient buffers.
  for (DType gt : {F, DType::BF16}) {
    Dual dw = b.out({H, I}, gt);
    b.cpu->linear_weight_grad(m.cpu, dy.cpu, dw.cpu);
    b.check(gt == F ? "linear_weight_grad (fp32 dw)" : "linear_weight_grad (bf16 dw)",
            [&] { b.gpu->linear_weight_grad(m.gpu, dy.gpu, dw.gpu); }, {{&dw, H * I}},
            gt == F ? tol : std::max(tol, 1e-2));
  }
  // Both at once (down_proj's backward: dy the fp32 residual gradient), overwriting and accumulating dx: the bits of
  // the two ops alone on the GPU, within tol of the CPU, one Gemm scope a call; in bf16 mode one launch fewer than
  // the two alone (dy converted once for both GEMMs, not by each).
  for (const bool accumulate : {false, true}) {
    Dual bdx = b.tokens(I, a, 9), start = b.tokens(I, a, 9), bdw = b.out({H, I}, a);
    const auto reset = [&] {
      CUDA_CHECK(cudaMemcpy(bdx.gpu.ref().data, start.gpu.ref().data, size_t(N * I) * dtype_size(a),
                            cudaMemcpyDeviceToDevice));
    };
    reset();
    const uint64_t alone_from = cuda_launch::total();
    b.gpu->linear_input_grad(dy.gpu, wd.gpu, bdx.gpu, accumulate);
    b.gpu->linear_weight_grad(m.gpu, dy.gpu, bdw.gpu);
    const uint64_t alone_launches = cuda_launch::total() - alone_from;
    const std::vector<float> alone_dx = b.gpu_values(bdx, N * I), alone_dw = b.gpu_values(bdw, H * I);
    b.cpu->linear_backward(m.cpu, wd.cpu, dy.cpu, bdx.cpu, accumulate, bdw.cpu);
    HostStepClock clock;
    b.gpu->set_step_clock(&clock);
    uint64_t launches = 0;
    b.check(accumulate ? "linear_backward (accumulate)" : "linear_backward", [&] {
      reset();
      const uint64_t from = cuda_launch::total();
      b.gpu->linear_backward(m.gpu, wd.gpu, dy.gpu, bdx.gpu, accumulate, bdw.gpu);
      launches = cuda_launch::total() - from;
    }, {{&bdx, N * I}, {&bdw, H * I}}, tol);
    b.gpu->set_step_clock(nullptr);
    EXPECT_EQ(clock.take().calls_of(TimeCategory::Gemm), 2u) << "two runs, one scope each";
    EXPECT_EQ(b.gpu_values(bdx, N * I), alone_dx) << "linear_backward's dx is not the bits of linear_input_grad's";
    EXPECT_EQ(b.gpu_values(bdw, H * I), alone_dw) << "linear_backward's dw is not the bits of linear_weight_grad's";
    EXPECT_EQ(alone_launches - launches, a == DType::BF16 ? 1u : 0u) << alone_launches << " launches alone";
  }
}

TEST_P(CudaModelOpsTest, RmsNorm) {
  Backends b(*GetParam().shape, GetParam().act);
  const DType a = b.act, F = DType::F32;
  const int64_t H = b.shape.hidden, N = b.N();
  const double tol = tol_for(a);
  Dual x = b.tokens(H, F, 1, 3.0f), w = b.weight({H}, a, 2), y = b.out_tokens(H, a), rstd = b.out({b.cpu->token_rows(b.plan)}, F);
  Dual rstd_g = b.out({b.gpu->token_rows(b.plan)}, F);
  b.cpu->rmsnorm_forward(x.cpu, w.cpu, 1e-6f, y.cpu, rstd.cpu);
  rstd.gpu = std::move(rstd_g.gpu);
  b.check("rmsnorm_forward", [&] { b.gpu->rmsnorm_forward(x.gpu, w.gpu, 1e-6f, y.gpu, rstd.gpu); },
          {{&y, N * H}, {&rstd, N}}, tol);
  Dual dy = b.tokens(H, a, 3), dx = b.out_tokens(H, F), dw = b.out({H}, F);
  b.cpu->rmsnorm_backward(x.cpu, w.cpu, rstd.cpu, dy.cpu, dx.cpu, dw.cpu);
  b.check("rmsnorm_backward", [&] { b.gpu->rmsnorm_backward(x.gpu, w.gpu, rstd.gpu, dy.gpu, dx.gpu, dw.gpu); },
          {{&dx, N * H}, {&dw, H}}, tol);
  // The residual stream's gradient added in the same pass (the CPU: backward, then add).
  Dual res = b.tokens(H, F, 4), dxr = b.out_tokens(H, F), dwr = b.out({H}, F);
  b.cpu->rmsnorm_backward_add(x.cpu, w.cpu, rstd.cpu, dy.cpu, res.cpu, dxr.cpu, dwr.cpu);
  b.check("rmsnorm_backward_add",
          [&] { b.gpu->rmsnorm_backward_add(x.gpu, w.gpu, rstd.gpu, dy.gpu, res.gpu, dxr.gpu, dwr.gpu); },
          {{&dxr, N * H}, {&dwr, H}}, tol);
}

TEST_P(CudaModelOpsTest, QkNormRope) {
  Backends b(*GetParam().shape, GetParam().act);
  const DType a = b.act, F = DType::F32;
  const int64_t d = b.shape.head_dim, heads = b.shape.heads, N = b.N(), D = heads * d;
  const double tol = tol_for(a);
  Dual x = b.tokens(D, a, 1, 2.0f), w = b.weight({d}, a, 2), y = b.out_tokens(D, a);
  Dual rstd = b.out({b.cpu->token_rows(b.plan) * heads}, F), rstd_g = b.out({b.gpu->token_rows(b.plan) * heads}, F);
  rstd.gpu = std::move(rstd_g.gpu);
  b.cpu->qk_norm_rope_forward(x.cpu, w.cpu, 1e-6f, y.cpu, rstd.cpu);
  b.check("qk_norm_rope_forward", [&] { b.gpu->qk_norm_rope_forward(x.gpu, w.gpu, 1e-6f, y.gpu, rstd.gpu); },
          {{&y, N * D}, {&rstd, N * heads}}, tol);
  Dual dy = b.tokens(D, a, 3), dx = b.out_tokens(D, a), dw = b.out({d}, F);
  b.cpu->qk_norm_rope_backward(x.cpu, w.cpu, rstd.cpu, dy.cpu, dx.cpu, dw.cpu);
  b.check("qk_norm_rope_backward",
          [&] { b.gpu->qk_norm_rope_backward(x.gpu, w.gpu, rstd.gpu, dy.gpu, dx.gpu, dw.gpu); },
          {{&dx, N * D}, {&dw, d}}, tol);
}

TEST_P(CudaModelOpsTest, SwiGluAndAdd) {
  Backends b(*GetParam().shape, GetParam().act);
  const DType a = b.act, F = DType::F32;
  const int64_t I = b.shape.inter, H = b.shape.hidden, N = b.N();
  const double tol = tol_for(a);
  Dual g = b.tokens(I, a, 1, 4.0f), u = b.tokens(I, a, 2), m = b.out_tokens(I, a);
  b.cpu->swiglu_forward(g.cpu, u.cpu, m.cpu);
  b.check("swiglu_forward", [&] { b.gpu->swiglu_forward(g.gpu, u.gpu, m.gpu); }, {{&m, N * I}}, tol);
  Dual dm = b.tokens(I, a, 3), dg = b.out_tokens(I, a), du = b.out_tokens(I, a);
  b.cpu->swiglu_backward(g.cpu, u.cpu, dm.cpu, dg.cpu, du.cpu);
  b.check("swiglu_backward", [&] { b.gpu->swiglu_backward(g.gpu, u.gpu, dm.gpu, dg.gpu, du.gpu); },
          {{&dg, N * I}, {&du, N * I}}, tol);
  Dual p = b.tokens(H, F, 4), q = b.tokens(H, F, 5), s = b.out_tokens(H, F);
  b.cpu->add(p.cpu, q.cpu, s.cpu);
  b.check("add", [&] { b.gpu->add(p.gpu, q.gpu, s.gpu); }, {{&s, N * H}}, 1e-7);  // exact: one fp32 add
}

// The table as a Piece of several runs (as the engine's pieces are): runs that cut rows in the middle.
Piece runs_of(const TensorRef& t, int64_t vocab, int64_t hidden) {
  const int64_t n = vocab * hidden, cut1 = 5 * hidden + hidden / 3, cut2 = n / 2 + 7;
  char* base = static_cast<char*>(t.data);
  const size_t es = dtype_size(t.dtype);
  return {t.dtype, {{0, cut1, base}, {cut1, cut2 - cut1, base + es * cut1}, {cut2, n - cut2, base + es * cut2}}};
}

TEST_P(CudaModelOpsTest, Embedding) {
  Backends b(*GetParam().shape, GetParam().act);
  const DType a = b.act, F = DType::F32;
  const int64_t H = b.shape.hidden, V = b.shape.vocab, N = b.N();
  Dual table = b.weight({V, H}, a, 1), x = b.out_tokens(H, F);
  b.cpu->embedding_forward(runs_of(table.cpu, V, H), V, x.cpu);
  b.check("embedding_forward", [&] { b.gpu->embedding_forward(runs_of(table.gpu, V, H), V, x.gpu); },
          {{&x, N * H}}, 0.0);  // a copy: exact
  Dual dx = b.tokens(H, F, 2), dt = b.out({V, H}, a);
  b.cpu->embedding_backward(dx.cpu, V, runs_of(dt.cpu, V, H));
  b.check("embedding_backward", [&] { b.gpu->embedding_backward(dx.gpu, V, runs_of(dt.gpu, V, H)); },
          {{&dt, V * H}}, a == F ? 0.0 : 1e-2);  // fp32: the same sums in the same order
}

TEST_P(CudaModelOpsTest, PooledHeadAndPairLoss) {
  Backends b(*GetParam().shape, GetParam().act);
  const DType a = b.act, F = DType::F32;
  const int64_t H = b.shape.hidden, S = b.plan.num_seqs(), N = b.N();
  const double tol = tol_for(a);
  Dual x = b.tokens(H, F, 1, 2.0f), nw = b.weight({H}, a, 2), sc = b.weight({1, H}, a, 3, 0.1f), r = b.out({S}, F);
  b.cpu->pooled_head_forward(x.cpu, nw.cpu, sc.cpu, 1e-6f, r.cpu);
  b.check("pooled_head_forward", [&] { b.gpu->pooled_head_forward(x.gpu, nw.gpu, sc.gpu, 1e-6f, r.gpu); },
          {{&r, S}}, tol);
  std::vector<uint8_t> mask(size_t(S / 2), 1);
  mask.back() = 0;  // one padding pair: no loss, zero gradient
  // With margins and centering (their upload beside the mask); the no-margin path below.
  std::vector<float> margin(mask.size());
  for (size_t i = 0; i < margin.size(); ++i) margin[i] = 0.25f * float(i % 3);
  const PairLossInputs in{.mask = mask, .margin = margin, .center = 0.01};
  Dual dr = b.out({S}, F);
  b.cpu->pair_loss(r.cpu, in, dr.cpu);
  const PairStats cs = b.cpu->take_pair_stats();
  EXPECT_EQ(cs.real_pairs, S / 2 - 1);
  b.check("pair_loss", [&] { b.gpu->pair_loss(r.gpu, in, dr.gpu); }, {{&dr, S}}, tol);
  EXPECT_EQ(b.gpu->pending_pair_losses(), 2);  // check() runs the op twice
  b.gpu->take_pair_stats();
  EXPECT_EQ(b.gpu->pending_pair_losses(), 0);
  b.gpu->pair_loss(r.gpu, in, dr.gpu);
  const PairStats gs = b.gpu->take_pair_stats();
  EXPECT_NEAR(gs.loss_sum, cs.loss_sum, tol * std::abs(cs.loss_sum) + 1e-6);
  EXPECT_EQ(gs.real_pairs, cs.real_pairs);
  EXPECT_NEAR(gs.chosen_reward_sum, cs.chosen_reward_sum, tol * 10 + 1e-6);
  EXPECT_NEAR(gs.rejected_reward_sum, cs.rejected_reward_sum, tol * 10 + 1e-6);
  // Metrics add up over the calls until taken, past the device's slots (64) too, in call order: the sum of
  // 100 identical calls' sums, each call's as one call gives them.
  b.gpu->pair_loss(r.gpu, {.mask = mask}, {});
  const PairStats plain = b.gpu->take_pair_stats();
  for (int i = 0; i < 100; ++i) b.gpu->pair_loss(r.gpu, {.mask = mask}, {});
  const PairStats many = b.gpu->take_pair_stats();
  double loss = 0;
  for (int i = 0; i < 100; ++i) loss += plain.loss_sum;
  EXPECT_EQ(many.loss_sum, loss);
  EXPECT_EQ(many.real_pairs, 100 * cs.real_pairs);
  EXPECT_EQ(b.gpu->take_pair_stats().real_pairs, 0);  // taken: nothing left
  // Groups (pmtrain's training sets): each group's sums as the CPU's. Calls with and without groups
  // interleaved past the slots' read-back, each taken back as its own call.
  std::vector<int32_t> group(mask.size());
  for (size_t i = 0; i < group.size(); ++i) group[i] = int32_t(i % 3 == 1 ? 2 : 0);  // group 1 empty
  const PairLossInputs grouped{.mask = mask, .margin = margin, .center = 0.01, .group = group, .groups = 3};
  b.cpu->pair_loss(r.cpu, grouped, dr.cpu);
  const PairStats cg = b.cpu->take_pair_stats();
  ASSERT_EQ(cg.groups.size(), 3u);
  EXPECT_EQ(cg.groups[0].real_pairs + cg.groups[2].real_pairs, cs.real_pairs);
  for (int i = 0; i < 70; ++i) b.gpu->pair_loss(r.gpu, i % 2 ? grouped : in, {});
  const std::vector<PairStats> each = b.gpu->take_pair_stats_each();
  ASSERT_EQ(each.size(), 70u);
  for (size_t i = 0; i < each.size(); ++i) {
    ASSERT_EQ(each[i].groups.size(), i % 2 ? 3u : 0u) << "call " << i;
    EXPECT_EQ(each[i].real_pairs, cs.real_pairs) << "call " << i;
    EXPECT_NEAR(each[i].loss_sum, cs.loss_sum, tol * std::abs(cs.loss_sum) + 1e-6) << "call " << i;
    for (size_t g = 0; g < each[i].groups.size(); ++g) {
      const PairStats &gg = each[i].groups[g], &cc = cg.groups[g];
      EXPECT_EQ(gg.real_pairs, cc.real_pairs) << "call " << i << " group " << g;
      EXPECT_EQ(gg.correct_pairs, cc.correct_pairs) << "call " << i << " group " << g;
      EXPECT_NEAR(gg.loss_sum, cc.loss_sum, tol * std::abs(cc.loss_sum) + 1e-6) << "call " << i << " group " << g;
      EXPECT_NEAR(gg.chosen_reward_sum, cc.chosen_reward_sum, tol * 10 + 1e-6) << "call " << i << " group " << g;
    }
  }
  // The same drewards on both sides for the head's backward (the CPU's).
  Dual drs = b.weight({S}, F, 9);
  Dual dx = b.out_tokens(H, F), dn = b.out({H}, F), ds = b.out({1, H}, F);
  b.cpu->pooled_head_backward(x.cpu, nw.cpu, sc.cpu, 1e-6f, drs.cpu, dx.cpu, dn.cpu, ds.cpu);
  b.check("pooled_head_backward",
          [&] { b.gpu->pooled_head_backward(x.gpu, nw.gpu, sc.gpu, 1e-6f, drs.gpu, dx.gpu, dn.gpu, ds.gpu); },
          {{&dx, N * H}, {&dn, H}, {&ds, H}}, tol);
}

TEST_P(CudaModelOpsTest, Attention) {
  Backends b(*GetParam().shape, GetParam().act);
  const DType a = b.act, F = DType::F32;
  const AttentionShape s{b.shape.heads, b.shape.kv_heads, b.shape.head_dim};
  const int64_t N = b.N(), Dq = s.heads * s.head_dim, Dk = s.kv_heads * s.head_dim;
  const double tol = tol_for(a);
  Dual q = b.tokens(Dq, a, 1, 2.0f), k = b.tokens(Dk, a, 2, 2.0f), v = b.tokens(Dk, a, 3), o = b.out_tokens(Dq, a);
  Dual lse = b.out({b.cpu->token_rows(b.plan), s.heads}, F), lse_g = b.out({b.gpu->token_rows(b.plan), s.heads}, F);
  lse.gpu = std::move(lse_g.gpu);
  b.cpu->attention_forward(q.cpu, k.cpu, v.cpu, s, o.cpu, lse.cpu);
  b.check("attention_forward", [&] { b.gpu->attention_forward(q.gpu, k.gpu, v.gpu, s, o.gpu, lse.gpu); },
          {{&o, N * Dq}, {&lse, N * s.heads}}, tol);
  Dual d_o = b.tokens(Dq, a, 4), dq = b.out_tokens(Dq, a), dk = b.out_tokens(Dk, a), dv = b.out_tokens(Dk, a);
  b.cpu->attention_backward(q.cpu, k.cpu, v.cpu, o.cpu, d_o.cpu, lse.cpu, s, dq.cpu, dk.cpu, dv.cpu);
  b.check("attention_backward",
          [&] { b.gpu->attention_backward(q.gpu, k.gpu, v.gpu, o.gpu, d_o.gpu, lse.gpu, s, dq.gpu, dk.gpu, dv.gpu); },
          {{&dq, N * Dq}, {&dk, N * Dk}, {&dv, N * Dk}}, tol);
}

// model.attention: flash_fma keeps bf16 attention at head_dim 128 off the tensor cores: within the same bound
// of the CPU as the default (tensor-core) path, and in other bits (the two sum in different orders).
TEST(CudaModelOpsAttentionKind, FlashFmaRunsTheFmaKernels) {
  ZERO_SKIP_WITHOUT_CUDA();
  const Shape shape{"d128", 256, 2, 1, 128, 64, 97, {70, 5, 64}};
  std::vector<float> out[2];
  int i = 0;
  for (AttentionKind kind : {AttentionKind::Auto, AttentionKind::FlashFma}) {
    Backends b(shape, DType::BF16, kind);
    const AttentionShape s{shape.heads, shape.kv_heads, shape.head_dim};
    const int64_t N = b.N(), Dq = s.heads * s.head_dim, Dk = s.kv_heads * s.head_dim;
    Dual q = b.tokens(Dq, b.act, 1, 2.0f), k = b.tokens(Dk, b.act, 2, 2.0f), v = b.tokens(Dk, b.act, 3);
    Dual o = b.out_tokens(Dq, b.act), lse = b.out({b.cpu->token_rows(b.plan), s.heads}, DType::F32);
    Dual lse_g = b.out({b.gpu->token_rows(b.plan), s.heads}, DType::F32);
    lse.gpu = std::move(lse_g.gpu);
    b.cpu->attention_forward(q.cpu, k.cpu, v.cpu, s, o.cpu, lse.cpu);
    b.check(kind == AttentionKind::Auto ? "attention_forward (auto)" : "attention_forward (flash_fma)",
            [&] { b.gpu->attention_forward(q.gpu, k.gpu, v.gpu, s, o.gpu, lse.gpu); }, {{&o, N * Dq}}, 1e-2);
    out[i++] = b.gpu_values(o, N * Dq);
  }
  EXPECT_NE(out[0], out[1]) << "equal bits: both runs took the same kernels";
}

// model.attention: flash_wide runs the wide tensor-core kernels where the tensor-core path applies, which sum every
// element as the 16-row ones do (model/cuda/attention_kernels.h): forward and backward the same bits as the default
// path in bf16 at head_dim 128; in fp32 (no tensor-core path) it runs the default's kernels, without an error.
TEST(CudaModelOpsAttentionKind, FlashWideGivesTheDefaultBits) {
  ZERO_SKIP_WITHOUT_CUDA();
  const Shape shape{"d128", 256, 2, 1, 128, 64, 97, {70, 5, 64}};
  for (DType act : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dtype_name(act));
    std::vector<std::vector<float>> out[2];
    int i = 0;
    for (AttentionKind kind : {AttentionKind::Auto, AttentionKind::FlashWide}) {
      Backends b(shape, act, kind);
      const AttentionShape s{shape.heads, shape.kv_heads, shape.head_dim};
      const int64_t N = b.N(), Dq = s.heads * s.head_dim, Dk = s.kv_heads * s.head_dim;
      Dual q = b.tokens(Dq, b.act, 1, 2.0f), k = b.tokens(Dk, b.act, 2, 2.0f), v = b.tokens(Dk, b.act, 3);
      Dual d_o = b.tokens(Dq, b.act, 4);
      Dual o = b.out_tokens(Dq, b.act), lse = b.out({b.gpu->token_rows(b.plan), s.heads}, DType::F32);
      Dual dq = b.out_tokens(Dq, b.act), dk = b.out_tokens(Dk, b.act), dv = b.out_tokens(Dk, b.act);
      b.gpu->attention_forward(q.gpu, k.gpu, v.gpu, s, o.gpu, lse.gpu);
      b.gpu->attention_backward(q.gpu, k.gpu, v.gpu, o.gpu, d_o.gpu, lse.gpu, s, dq.gpu, dk.gpu, dv.gpu);
      out[i++] = {b.gpu_values(o, N * Dq), b.gpu_values(lse, N * s.heads), b.gpu_values(dq, N * Dq),
                  b.gpu_values(dk, N * Dk), b.gpu_values(dv, N * Dk)};
    }
    const char* names[] = {"o", "lse", "dq", "dk", "dv"};
    for (size_t j = 0; j < out[0].size(); ++j) {
      EXPECT_EQ(out[0][j].size(), out[1][j].size());
      EXPECT_EQ(0, std::memcmp(out[0][j].data(), out[1][j].data(), out[0][j].size() * sizeof(float)))
          << names[j] << ": flash_wide's bits differ from the default path's";
    }
  }
}

// Once the pool has its arena for a batch, the same batch again makes no cudaMalloc (the pool reuses its blocks).
TEST(CudaModelOpsPool, SteadyStateAllocatesNothing) {
  ZERO_SKIP_WITHOUT_CUDA();
  Backends b(kFixture, DType::BF16);
  auto pass = [&] {
    Dual x = b.tokens(b.shape.hidden, DType::F32, 1), w = b.weight({b.shape.hidden}, DType::BF16, 2);
    Dual y = b.out_tokens(b.shape.hidden, DType::BF16), rstd = b.out({b.gpu->token_rows(b.plan)}, DType::F32);
    b.gpu->rmsnorm_forward(x.gpu, w.gpu, 1e-6f, y.gpu, rstd.gpu);
  };
  pass();  // its blocks in segments of their own, one arena's worth when it ends
  pass();  // the arena
  const size_t mallocs = b.gpu->pool_stats().device_mallocs;
  pass();
  EXPECT_EQ(b.gpu->pool_stats().device_mallocs, mallocs);
}

// The GEMM plan cache stays bounded (token budgets give the GEMMs new token counts all epoch long): past
// LtGemm::kMaxCachedPlans distinct shapes it starts afresh, and a shape planned again computes as before.
TEST(CudaModelOpsGemmPlans, TheCacheStaysBoundedAndReplansTheSame) {
  ZERO_SKIP_WITHOUT_CUDA();
  using cuda_gemm::LtGemm;
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  {
    LtGemm gemm(stream);
    const int64_t in = 4, out = 4, max_rows = int64_t(LtGemm::kMaxCachedPlans) + 10;
    std::vector<float> w(size_t(out * in)), x(size_t(max_rows * in));
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 5) - 2);
    float *dw = nullptr, *dx = nullptr, *dy = nullptr;
    CUDA_CHECK(cudaMalloc(&dw, w.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dx, x.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dy, size_t(max_rows * out) * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dw, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    const auto forward = [&](int64_t rows) {  // y = x w^T over the first `rows` rows; row rows - 1 read back
      gemm.run({cuda_gemm::linear_forward_shape(rows, in, out), DType::F32, DType::F32}, dw, dx, dy, 0.0f);
      std::vector<float> y(static_cast<size_t>(out));
      CUDA_CHECK(cudaMemcpy(y.data(), dy + (rows - 1) * out, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
      for (int64_t o = 0; o < out; ++o) {
        float want = 0;
        for (int64_t i = 0; i < in; ++i) want += w[size_t(o * in + i)] * x[size_t((rows - 1) * in + i)];
        EXPECT_EQ(y[size_t(o)], want) << "rows " << rows << " output " << o;  // small integers: exact
      }
    };
    size_t most = 0;
    for (int64_t rows = 1; rows <= max_rows; ++rows) {
      forward(rows);
      most = std::max(most, gemm.cached_plans());
    }
    EXPECT_LE(most, LtGemm::kMaxCachedPlans);
    EXPECT_LT(gemm.cached_plans(), 20u);  // started afresh once, 10 shapes ago
    forward(1);                           // planned again
    CUDA_CHECK(cudaFree(dw));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// Each host wait of the model's ops (a batch's upload before its pinned buffer is rewritten, to_host, the
// pair loss's metrics when taken) goes through the guard it was given (cuda/host_wait.h), none around it: pmtrain
// installs the NCCL communicator's, which watches them under the peer timeout. Counted at the guard.
TEST(CudaModelOpsHostWaits, EveryOneGoesThroughTheGuard) {
  ZERO_SKIP_WITHOUT_CUDA();
  int waits = 0;
  Backends b(kFixture, DType::BF16, AttentionKind::Auto, [&](cudaEvent_t done) {
    ++waits;
    CUDA_CHECK(cudaEventSynchronize(done));
  });
  // begin_batch and the pair mask wait only for their staging buffer's previous upload, and only while it
  // is in flight (the first upload has none).
  EXPECT_EQ(waits, 0);
  const int64_t S = b.plan.num_seqs();
  Dual r = b.weight({S}, DType::F32, 4), x = b.tokens(b.shape.hidden, DType::BF16, 5);
  const int after_setup = waits;  // filling the tensors may wait too (to_host of what they hold)
  // to_host: the stream drained before the copy into pageable memory (cuda/host_wait.h), then the copy.
  b.gpu_values(r, S);
  EXPECT_EQ(waits, after_setup + 2);  // fp32
  b.gpu_values(x, b.N() * b.shape.hidden);
  EXPECT_EQ(waits, after_setup + 4);  // bf16
  std::vector<uint8_t> mask(size_t(S / 2), 1);
  Dual dr = b.out({S}, DType::F32);
  b.gpu->pair_loss(r.gpu, {.mask = mask}, dr.gpu);
  // The test's own wait, not the ops': the mask's first upload is done, so the second call's staging buffer
  // is free on a GPU too.
  CUDA_CHECK(cudaDeviceSynchronize());
  b.gpu->pair_loss(r.gpu, {.mask = mask}, dr.gpu);
  EXPECT_EQ(waits, after_setup + 4);  // queued: the metrics stay on the device
  b.gpu->take_pair_stats();
  EXPECT_EQ(waits, after_setup + 5);  // both calls' metrics in one read (pinned: no drain before)
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaModelOpsTest,
                         ::testing::Values(Case{&kFixture, DType::F32}, Case{&kFixture, DType::BF16},
                                           Case{&kQwen4B, DType::F32}, Case{&kQwen4B, DType::BF16}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.shape->name == std::string("fixture") ? "fixture" : "qwen3_4b") +
                                  (i.param.act == DType::F32 ? "_fp32" : "_bf16");
                         });

}  // namespace
