// model/activation_plan.h against what the CPU backend really allocates: one forward_backward (and one
// forward alone) per shape,
// ModelOps' own byte counter at its peak (every alloc and free through the backend), in each
// activation-checkpointing mode (none, selective, full). The plan replays the orchestration's order, so the two must agree exactly.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "model/activation_plan.h"
#include "model/cpu/cpu_model_ops.h"
#include "model/init.h"
#include "model/reward_model.h"
#include "model_test_util.h"

namespace zero::model {
namespace {

struct Shape {
  int64_t layers, hidden, intermediate, heads, kv_heads, head_dim;
  std::vector<int64_t> lens;  // sequence lengths (chosen, rejected, ...)
  bool packed;
};

size_t measured_peak(const Qwen3Config& c, const data::PairBatch& batch, ActivationCheckpointing ckpt,
                     int64_t selective_layers = 0, bool forward_only = false, bool recompute_attention = false) {
  auto owned = make_cpu_model_ops();
  ModelOps* ops = owned.get();
  RewardModelOptions o;
  o.activation_checkpointing = ckpt;
  o.selective_layers = selective_layers;
  o.recompute_attention = recompute_attention;
  Qwen3RewardModel m(c, o, std::move(owned));
  DenseParams p(qwen3_rm_groups(c));
  init_random(p, c, 3);
  if (forward_only)
    m.forward(batch, p);
  else
    m.forward_backward(batch, p);
  EXPECT_EQ(ops->live_bytes(), 0u) << "every activation is freed after the pass";
  return ops->peak_bytes();
}

TEST(ActivationPlan, EqualsTheCpuBackendsPeakAllocation) {
  const std::vector<Shape> shapes = {
      {2, 64, 160, 4, 2, 16, {7, 5, 9, 3}, false},
      {3, 64, 160, 4, 2, 16, {12, 12}, true},
      {1, 32, 48, 2, 1, 16, {20, 4, 6, 6, 1, 2}, true},   // intermediate < 2 x hidden: another transient peak
      {4, 48, 256, 6, 3, 8, {16, 11, 5, 9}, false},      // MLP-heavy
  };
  std::mt19937 rng(5);
  for (const Shape& s : shapes) {
    Qwen3Config c = tiny_qwen3_config();
    c.num_layers = s.layers, c.hidden_size = s.hidden, c.intermediate_size = s.intermediate;
    c.num_heads = s.heads, c.num_kv_heads = s.kv_heads, c.head_dim = s.head_dim;
    std::vector<std::vector<int32_t>> seqs;
    int64_t tokens = 0, longest = 0;
    for (int64_t len : s.lens) {
      std::vector<int32_t> q(static_cast<size_t>(len));
      for (auto& t : q) t = int32_t(1 + rng() % uint32_t(c.vocab_size - 1));
      seqs.push_back(q);
      tokens += len, longest = std::max(longest, len);
    }
    std::vector<int64_t> order(seqs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
    const data::PairBatch batch =
        s.packed ? testing::packed_batch(seqs, 0, 2 * longest, order) : testing::padded_batch(seqs, 0);
    for (ActivationCheckpointing ckpt :
         {ActivationCheckpointing::None, ActivationCheckpointing::Selective, ActivationCheckpointing::Full}) {
      const ActivationPlan plan = plan_activations(c, tokens, int64_t(seqs.size()), ckpt, kCpuActivations);
      EXPECT_EQ(plan.peak, measured_peak(c, batch, ckpt))
          << "layers " << s.layers << " hidden " << s.hidden << " tokens " << tokens << " checkpointing mode " << int(ckpt);
    }
    // A forward pass alone (an evaluation batch), whatever the checkpointing mode: it keeps nothing.
    const size_t forward = plan_forward_activations(c, tokens, int64_t(seqs.size()), kCpuActivations);
    EXPECT_EQ(forward, measured_peak(c, batch, ActivationCheckpointing::None, 0, true)) << "forward, layers " << s.layers;
    EXPECT_EQ(forward, measured_peak(c, batch, ActivationCheckpointing::Full, 0, true)) << "forward, layers " << s.layers;
    EXPECT_LT(forward, plan_activations(c, tokens, int64_t(seqs.size()), ActivationCheckpointing::Full, kCpuActivations).peak);
    // Full with its last layers selective (model.selective_layers), its attention kept or recomputed
    // (model.recompute_attention).
    for (bool recompute : {false, true})
      for (int64_t sel = 0; sel < s.layers; ++sel)
        EXPECT_EQ(plan_activations(c, tokens, int64_t(seqs.size()), ActivationCheckpointing::Full, kCpuActivations, sel,
                                   recompute)
                      .peak,
                  measured_peak(c, batch, ActivationCheckpointing::Full, sel, false, recompute))
            << "layers " << s.layers << " hidden " << s.hidden << " selective_layers " << sel << " recompute_attention "
            << recompute;
  }
}

// The GPU path's dtypes by hand (no GPU here): tiny config, 10 rows, bf16 activations, fp32 residual h and
// stats. a, q, qr, o, b: 5 x 10 x 64 x 2 = 6400; k, v, kr: 3 x 10 x 32 x 2 = 1920; g, u, m: 3 x 10 x 160 x 2
// = 9600; h: 10 x 64 x 4 = 2560; rstd_in, rstd_post: 2 x 40; rstd_q, lse: 2 x 160; rstd_k: 80. Sum 20960.
// Selective drops a, qr, b (3 x 1280), kr (640) and m (3200): 7680, rebuilt in backward; 13280 stay. Full keeps
// o (1280) and lse (160): 1440, and recomputes 19520; with recompute_attention it keeps nothing.
TEST(ActivationPlan, GpuDtypesByHand) {
  using Mode = ActivationCheckpointing;
  const Qwen3Config c = tiny_qwen3_config();
  EXPECT_EQ(plan_activations(c, 10, 2, Mode::None, kGpuActivations).per_layer_kept, 20960u);
  EXPECT_EQ(plan_activations(c, 10, 2, Mode::None, kGpuActivations).per_layer_recomputed, 0u);
  // fp32 throughout: every activation twice as large except h and the stats (2560 + 480 stay).
  EXPECT_EQ(plan_activations(c, 10, 2, Mode::None, kCpuActivations).per_layer_kept, 2 * (20960u - 2560 - 480) + 2560 + 480);
  const ActivationPlan sel = plan_activations(c, 10, 2, Mode::Selective, kGpuActivations);
  EXPECT_EQ(sel.per_layer_forward, 20960u);
  EXPECT_EQ(sel.per_layer_kept, 13280u);
  EXPECT_EQ(sel.per_layer_recomputed, 7680u);
  const ActivationPlan full = plan_activations(c, 10, 2, Mode::Full, kGpuActivations);
  EXPECT_EQ(full.per_layer_kept, 1440u);
  EXPECT_EQ(full.per_layer_recomputed, 19520u);
  EXPECT_EQ(full.full_layers, 2);
  EXPECT_EQ(full.attention_recomputed_layers, 0);
  const ActivationPlan least = plan_activations(c, 10, 2, Mode::Full, kGpuActivations, 0, true);
  EXPECT_EQ(least.per_layer_kept, 0u);
  EXPECT_EQ(least.per_layer_recomputed, 20960u);
  EXPECT_EQ(least.attention_recomputed_layers, 2);
  // The peak: more by at most the layers' kept o and lse (2 x 1440; where the peak falls, one layer's are the
  // scratch's under either).
  EXPECT_GT(full.peak, least.peak);
  EXPECT_LE(full.peak, least.peak + 2 * 1440);
  // Each mode keeps less than the one before.
  EXPECT_LT(plan_activations(c, 100, 2, Mode::Full, kCpuActivations, 0, true).peak,
            plan_activations(c, 100, 2, Mode::Full, kCpuActivations).peak);
  EXPECT_LT(plan_activations(c, 100, 2, Mode::Full, kCpuActivations).peak,
            plan_activations(c, 100, 2, Mode::Selective, kCpuActivations).peak);
  EXPECT_LT(plan_activations(c, 100, 2, Mode::Selective, kCpuActivations).peak,
            plan_activations(c, 100, 2, Mode::None, kCpuActivations).peak);
}

// The CUDA ops' largest device scratch by hand, at Qwen3-4B's layer shapes and 16384 tokens in 16 sequences:
// the hidden norm's dw partials 1024 blocks x 2560 x 4 = 10,485,760; q-norm's (524,288 rows of 128, 8 a
// block, capped at 1024 blocks) 1024 x 128 x 4 = 524,288; the attention workspace 16384 x 32 x 4 = 2,097,152;
// the pooled head's 2 x 16 x 2560 x 4 = 327,680; in bf16, the residual stream's gradient as a bf16 GEMM operand
// 16384 x 2560 x 2 = 83,886,080. 4000 tokens: their rows padded to 4032 for the GEMM operand (2 x 4032 x 2560 = 20,643,840, not 20,480,000).
TEST(ActivationPlan, GpuOpScratchByHand) {
  Qwen3Config c;
  c.hidden_size = 2560, c.intermediate_size = 9728, c.num_layers = 2, c.num_heads = 32, c.num_kv_heads = 8;
  c.head_dim = 128;
  EXPECT_EQ(gpu_op_scratch_bytes(c, 16384, 16, DType::BF16), 83886080u);
  EXPECT_EQ(gpu_op_scratch_bytes(c, 16384, 16, DType::F32), 10485760u);
  EXPECT_EQ(gpu_op_scratch_bytes(c, 4000, 8, DType::BF16), 20643840u);
  // 100 tokens in fp32: the hidden norm's 100 blocks (100 x 2560 x 4 = 1,024,000) over q-norm's 400 blocks of
  // 128 (204,800) and the attention's 12,800.
  EXPECT_EQ(gpu_op_scratch_bytes(c, 100, 2, DType::F32), 1024000u);
}

}  // namespace
}  // namespace zero::model
