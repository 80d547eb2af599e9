// The whole reward model on CudaModelOps (fp32 mode) against the same model on the CPU backend, on the
// shared tiny Qwen3 fixture (tests/fixtures/qwen3_rm_tiny, the HF-parity fixture) and its batch: rewards,
// loss and every parameter gradient within 1e-5 relative L2 in each activation-checkpointing mode (none,
// selective, full), and with shared prompts; and the GPU run repeats itself bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "checkpoint/safetensors.h"
#include "data/batcher.h"
#include "model/activation_plan.h"
#include "model/cuda/cuda_model_ops.h"
#include "model/cuda/device_params.h"
#include "model/param_access.h"
#include "model/qwen3_config.h"
#include "model/reward_model.h"
#include "model/token_plan.h"
#include "tests/cuda/cuda_test_util.h"
#ifdef ZERO_EMULATED_CUDA
#include "tests/cuda/simt_schedule.h"
#endif
#include "tests/model/model_test_util.h"

namespace zero::model {
namespace {

double rel_l2(std::span<const float> got, std::span<const float> ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// The fixture's weights in DenseParams' flat groups (the engine's layout: the fused projections'), fp32.
DenseParams fixture_params(checkpoint::SafetensorsReader& reader, const Qwen3Config& config) {
  DenseParams host(qwen3_rm_groups(config));
  for (const GroupSpec& g : host.groups())
    for (const TensorSpec& t : g.tensors) reader.read_f32(t.name, host.param(t.name));
  return host;
}

TEST(CudaRewardModel, FixtureMatchesCpuInFp32Mode) {
  ZERO_SKIP_WITHOUT_CUDA();
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  for (ActivationCheckpointing ckpt :
       {ActivationCheckpointing::None, ActivationCheckpointing::Selective, ActivationCheckpointing::Full}) {
    RewardModelOptions opt;
    opt.activation_checkpointing = ckpt;
    const Qwen3RewardModel cpu(config, opt);
    DenseParams host(cpu.groups());
    for (const GroupSpec& g : host.groups())
      for (const TensorSpec& t : g.tensors) reader.read_f32(t.name, host.param(t.name));
    const testing::FixtureBatch fb = testing::fixture_batch(reader);
    const data::PairBatch batch = testing::padded_batch(fb.seqs, int32_t(config.pad_token_id), fb.row_len);
    const RewardOutput ref = cpu.forward_backward(batch, host);

    std::unique_ptr<CudaModelOps> owned = make_cuda_model_ops({nullptr, DType::F32, AttentionKind::Auto});
    const CudaModelOps* ops = owned.get();
    const Qwen3RewardModel gpu(config, opt, std::move(owned));
    DeviceParams dev(host, DType::F32);
    const RewardOutput out = gpu.forward_backward(batch, dev);
    // The device scratch the ops took at most at once is what the planner adds for it (fp32: no conversions).
    const TokenPlan plan = make_token_plan(batch, config.vocab_size);
    EXPECT_EQ(ops->peak_scratch_bytes(), gpu_op_scratch_bytes(config, plan.num_tokens(), plan.num_seqs(), DType::F32));
    const double r = rel_l2(out.rewards, ref.rewards);
    printf("  checkpointing mode %d: rewards rel L2 %.3e, loss %.9g vs %.9g\n", int(ckpt), r, out.pairs.loss_sum, ref.pairs.loss_sum);
    EXPECT_LE(r, 1e-5);
    EXPECT_NEAR(out.pairs.loss_sum, ref.pairs.loss_sum, 1e-5 * std::abs(ref.pairs.loss_sum));
    EXPECT_EQ(out.pairs.real_pairs, ref.pairs.real_pairs);
    EXPECT_EQ(out.pairs.correct_pairs, ref.pairs.correct_pairs);
    for (size_t g = 0; g < host.groups().size(); ++g)
      for (size_t t = 0; t < host.groups()[g].tensors.size(); ++t) {
        const std::vector<float> got = dev.grad(int(g), int(t));
        const double e = rel_l2(got, host.grad(int(g), int(t)));
        printf("    %-50s grad rel L2 %.3e\n", host.groups()[g].tensors[t].name.c_str(), e);
        EXPECT_LE(e, 1e-5) << host.groups()[g].tensors[t].name;
      }
    // Determinism: a second run gives the same bits.
    const RewardOutput again = gpu.forward_backward(batch, dev);
    EXPECT_EQ(0, std::memcmp(again.rewards.data(), out.rewards.data(), out.rewards.size() * sizeof(float)));
  }
}

// data.share_prompt on the GPU path: pairs whose answers share a prompt, laid out with the prompt once and
// run on CudaModelOps (fp32 mode: the attention kernels with hidden spans), give the CPU backend's rewards,
// loss and gradients of the same pairs with each answer whole, within 1e-5 relative.
TEST(CudaRewardModel, SharedPromptsGiveTheCpuResultsOfEachAnswerWhole) {
  ZERO_SKIP_WITHOUT_CUDA();
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  const Qwen3RewardModel cpu(config, RewardModelOptions{});
  DenseParams host = fixture_params(reader, config);
  const data::PairDataset ds = testing::pairs_with_shared_prompts(config.vocab_size);
  std::vector<int64_t> ids(size_t(ds.num_pairs()));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i);
  data::BatchConfig whole, shared;
  whole.layout = shared.layout = data::BatchLayout::Packed;
  whole.pack_row_len = shared.pack_row_len = 4096;  // every pair in one row
  whole.share_prompt = false;
  const data::PairBatch a = data::make_batch(ds, ids, {}, whole), b = data::make_batch(ds, ids, {}, shared);
  ASSERT_LT(b.real_tokens(), a.real_tokens());
  const RewardOutput ref = cpu.forward_backward(a, host);

  const Qwen3RewardModel gpu(config, RewardModelOptions{}, make_cuda_model_ops({nullptr, DType::F32, AttentionKind::Auto}));
  DeviceParams dev(host, DType::F32);
  const RewardOutput out = gpu.forward_backward(b, dev);
  // The layouts may order pairs differently: rewards by pair id.
  const std::vector<float> got = testing::rewards_by_pair_id(b, out.rewards);
  const std::vector<float> want = testing::rewards_by_pair_id(a, ref.rewards);
  printf("  shared prompts: %lld tokens instead of %lld, rewards rel L2 %.3e\n", (long long)b.real_tokens(),
         (long long)a.real_tokens(), rel_l2(got, want));
  EXPECT_LE(rel_l2(got, want), 1e-5);
  EXPECT_NEAR(out.pairs.loss_sum, ref.pairs.loss_sum, 1e-5 * std::abs(ref.pairs.loss_sum));
  for (size_t g = 0; g < host.groups().size(); ++g)
    for (size_t t = 0; t < host.groups()[g].tensors.size(); ++t)
      EXPECT_LE(rel_l2(dev.grad(int(g), int(t)), host.grad(int(g), int(t))), 1e-5) << host.groups()[g].tensors[t].name;
}

// bf16 mode, the training path on a GPU: selective and full recompute give none's rewards, loss and
// gradients bit for bit (same inputs, same kernels), and ModelOps' activation peak in each mode is what
// model/activation_plan.h plans at the GPU dtypes and this backend's token rows.
TEST(CudaRewardModel, CheckpointingModesAgreeBitForBitInBf16Mode) {
  ZERO_SKIP_WITHOUT_CUDA();
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  DenseParams host = fixture_params(reader, config);
  const testing::FixtureBatch fb = testing::fixture_batch(reader);
  const data::PairBatch batch = testing::packed_batch(fb.seqs, int32_t(config.pad_token_id), 40, {5, 3, 1, 4, 0, 2});
  const TokenPlan plan = make_token_plan(batch, config.vocab_size);
  DeviceParams dev(host, DType::BF16);
  RewardOutput ref;
  std::vector<std::vector<float>> ref_grads;
  // The modes, then full with its attention recomputed too (model.recompute_attention): peak[3].
  size_t peak[4] = {};
  for (int variant = 0; variant < 4; ++variant) {
    const ActivationCheckpointing mode = variant < 3 ? ActivationCheckpointing(variant) : ActivationCheckpointing::Full;
    RewardModelOptions opt;
    opt.activation_checkpointing = mode;
    opt.recompute_attention = variant == 3;
    std::unique_ptr<CudaModelOps> owned = make_cuda_model_ops({nullptr, DType::BF16, AttentionKind::Auto});
    const ModelOps* ops = owned.get();
    const Qwen3RewardModel gpu(config, opt, std::move(owned));
    const RewardOutput out = gpu.forward_backward(batch, dev);
    peak[variant] = ops->peak_bytes();
    EXPECT_EQ(peak[variant], plan_activations(config, ops->token_rows(plan), plan.num_seqs(), mode, kGpuActivations, 0,
                                              opt.recompute_attention)
                                 .peak)
        << "variant " << variant;
    // Beside them, the device scratch of one op at a time, as model::gpu_op_scratch_bytes plans it (bf16: with
    // the conversion of the residual stream's gradient for the GEMMs).
    const size_t scratch = static_cast<const CudaModelOps*>(ops)->peak_scratch_bytes();
    EXPECT_EQ(scratch, gpu_op_scratch_bytes(config, plan.num_tokens(), plan.num_seqs(), DType::BF16)) << "variant " << variant;
    if (mode == ActivationCheckpointing::None) printf("  op scratch bytes at most: %zu\n", scratch);
    std::vector<std::vector<float>> grads;
    for (size_t g = 0; g < host.groups().size(); ++g)
      for (size_t t = 0; t < host.groups()[g].tensors.size(); ++t) grads.push_back(dev.grad(int(g), int(t)));
    if (mode == ActivationCheckpointing::None) {
      ref = out, ref_grads = grads;
      continue;
    }
    ASSERT_EQ(out.rewards.size(), ref.rewards.size());
    EXPECT_EQ(0, std::memcmp(out.rewards.data(), ref.rewards.data(), out.rewards.size() * sizeof(float))) << "variant " << variant;
    EXPECT_EQ(out.pairs.loss_sum, ref.pairs.loss_sum) << "variant " << variant;
    for (size_t i = 0; i < grads.size(); ++i)
      EXPECT_EQ(0, std::memcmp(grads[i].data(), ref_grads[i].data(), grads[i].size() * sizeof(float)))
          << "variant " << variant << " tensor " << i;
  }
  printf("  activation peak bytes: none %zu, selective %zu, full %zu, full recomputing attention %zu\n", peak[0],
         peak[1], peak[2], peak[3]);
  EXPECT_LT(peak[3], peak[2]);
  EXPECT_LT(peak[2], peak[1]);
  EXPECT_LT(peak[1], peak[0]);
  // A forward pass alone (an evaluation batch): its peak is plan_forward_activations', below full's.
  std::unique_ptr<CudaModelOps> owned = make_cuda_model_ops({nullptr, DType::BF16, AttentionKind::Auto});
  const ModelOps* ops = owned.get();
  const Qwen3RewardModel gpu(config, RewardModelOptions{}, std::move(owned));
  const RewardOutput out = gpu.forward(batch, dev);
  EXPECT_EQ(0, std::memcmp(out.rewards.data(), ref.rewards.data(), out.rewards.size() * sizeof(float)));
  EXPECT_EQ(ops->peak_bytes(), plan_forward_activations(config, ops->token_rows(plan), plan.num_seqs(), kGpuActivations));
  EXPECT_LT(ops->peak_bytes(), peak[2]);
  // The first pass's segments became one arena's size when it ended; the second pass makes that arena, the
  // third fits in it.
  const CudaModelOps& cuda = *static_cast<const CudaModelOps*>(ops);
  gpu.forward(batch, dev);
  const size_t mallocs = cuda.pool_stats().device_mallocs;
  EXPECT_EQ(0, std::memcmp(gpu.forward(batch, dev).rewards.data(), out.rewards.data(), out.rewards.size() * sizeof(float)));
  EXPECT_EQ(cuda.pool_stats().device_mallocs, mallocs);
  // Between training and evaluation the pool's cached blocks go back to the device: none held after.
  EXPECT_GE(cuda.pool_stats().held_bytes, ops->peak_bytes());
  gpu.ops().release_cached_memory();
  EXPECT_EQ(cuda.pool_stats().held_bytes, 0u);
  EXPECT_EQ(cuda.pool_stats().in_use_bytes, 0u);
  const RewardOutput again = gpu.forward(batch, dev);  // and the pool makes blocks anew
  EXPECT_EQ(0, std::memcmp(again.rewards.data(), out.rewards.data(), out.rewards.size() * sizeof(float)));
}

// Training's form (queue_forward_backward) reads nothing back: micro-batches queue without a host wait for
// the device (counted at the ops' wait guard), and one take_pair_stats gives what forward_backward reports
// for each of them, summed, bit for bit.
TEST(CudaRewardModel, QueuedMicroBatchesWaitOnlyWhenTheirMetricsAreTaken) {
  ZERO_SKIP_WITHOUT_CUDA();
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  DenseParams host = fixture_params(reader, config);
  const testing::FixtureBatch fb = testing::fixture_batch(reader);
  const std::vector<data::PairBatch> batches = {
      testing::padded_batch(fb.seqs, int32_t(config.pad_token_id), fb.row_len),
      testing::packed_batch(fb.seqs, int32_t(config.pad_token_id), 40, {5, 3, 1, 4, 0, 2}),
      testing::padded_batch(std::vector<std::vector<int32_t>>(fb.seqs.begin(), fb.seqs.begin() + 2), int32_t(config.pad_token_id), fb.row_len)};
  DeviceParams dev(host, DType::BF16);
  int waits = 0;
  const Qwen3RewardModel gpu(config, {}, make_cuda_model_ops({nullptr, DType::BF16, AttentionKind::Auto},
                                                             [&](cudaEvent_t done) {
                                                               ++waits;
                                                               CUDA_CHECK(cudaEventSynchronize(done));
                                                             }));
  double loss = 0;
  int64_t pairs = 0, correct = 0, tokens = 0;
  for (const data::PairBatch& b : batches) {
    const RewardOutput out = gpu.forward_backward(b, dev);
    loss += out.pairs.loss_sum, pairs += out.pairs.real_pairs, correct += out.pairs.correct_pairs, tokens += out.real_tokens;
  }
  waits = 0;
  int64_t queued_tokens = 0;
  for (const data::PairBatch& b : batches) queued_tokens += gpu.queue_forward_backward(b, dev);
  EXPECT_EQ(gpu.ops().pending_pair_losses(), 3);
#ifdef ZERO_EMULATED_CUDA
  EXPECT_EQ(waits, 0);  // every upload is complete on the fake runtime: a wait here is a drain
#else
  EXPECT_LE(waits, 2 * 2);  // on a GPU, at most the staging buffers' (batch and mask) of the previous batch
#endif
  const int queued_waits = waits;
  const PairStats st = gpu.ops().take_pair_stats();
  EXPECT_EQ(waits, queued_waits + 1);
  EXPECT_EQ(st.loss_sum, loss);
  EXPECT_EQ(st.real_pairs, pairs);
  EXPECT_EQ(st.correct_pairs, correct);
  EXPECT_EQ(queued_tokens, tokens);
  // Results asked for with metrics not taken: refused, not mixed in.
  gpu.queue_forward_backward(batches[0], dev);
  EXPECT_THROW(gpu.forward(batches[0], dev), Error);
}

#ifdef ZERO_EMULATED_CUDA
// Without a GPU, the kernels under the SIMT emulator: the whole model's rewards, loss and every gradient in bf16
// mode bit for bit the same whatever order the emulator runs a block's threads and a grid's blocks in
// (tests/cuda/simt_emulator.h's schedules), as two runs on a GPU must be: every kernel's sums keep one order.
TEST(CudaRewardModel, EveryEmulatorScheduleGivesTheSameBits) {
  const char* env = std::getenv("ZERO_SIMT_SCHEDULE");
  if (env != nullptr && *env != '\0') GTEST_SKIP() << "runs in the default entry alone: it tries every schedule itself";
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  DenseParams host = fixture_params(reader, config);
  const testing::FixtureBatch fb = testing::fixture_batch(reader);
  const data::PairBatch batch = testing::packed_batch(fb.seqs, int32_t(config.pad_token_id), 40, {5, 3, 1, 4, 0, 2});
  DeviceParams dev(host, DType::BF16);
  const Qwen3RewardModel gpu(config, RewardModelOptions{}, make_cuda_model_ops({nullptr, DType::BF16, AttentionKind::Auto}));
  auto run = [&](const char* schedule) {
    simt::use_schedule(schedule);
    const RewardOutput out = gpu.forward_backward(batch, dev);
    std::vector<float> bits(out.rewards);
    bits.push_back(float(out.pairs.loss_sum));
    for (size_t g = 0; g < host.groups().size(); ++g)
      for (size_t t = 0; t < host.groups()[g].tensors.size(); ++t) {
        const std::vector<float> grad = dev.grad(int(g), int(t));
        bits.insert(bits.end(), grad.begin(), grad.end());
      }
    return bits;
  };
  const std::vector<float> want = run("");
  for (const char* schedule : {"reverse", "ahead", "random:1", "random:2"}) {
    const std::vector<float> got = run(schedule);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << schedule << ": " << differ << " of " << got.size() << " rewards, loss and gradient elements";
  }
  simt::use_schedule("");
}
#endif

}  // namespace
}  // namespace zero::model
