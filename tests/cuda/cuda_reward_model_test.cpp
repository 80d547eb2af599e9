// The whole reward model on CudaModelOps (fp32 mode) against the same model on the CPU backend, on the
// shared tiny Qwen3 fixture (tests/fixtures/qwen3_rm_tiny, the HF-parity fixture) and its batch: rewards,
// loss and every parameter gradient within 1e-5 relative L2; and with activation checkpointing the GPU
// run repeats itself bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "checkpoint/safetensors.h"
#include "model/cuda/cuda_model_ops.h"
#include "model/cuda/device_params.h"
#include "model/param_access.h"
#include "model/qwen3_config.h"
#include "model/reward_model.h"
#include "tests/cuda/cuda_test_util.h"
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

TEST(CudaRewardModel, FixtureMatchesCpuInFp32Mode) {
  ZERO_SKIP_WITHOUT_CUDA();
  checkpoint::SafetensorsReader reader(testing::fixture_file());
  const Qwen3Config config = load_hf_config(testing::fixture_dir() + "/config.json");
  for (bool ckpt : {false, true}) {
    RewardModelOptions opt;
    opt.activation_checkpointing = ckpt;
    const Qwen3RewardModel cpu(config, opt);
    DenseParams host(cpu.groups());
    for (const GroupSpec& g : host.groups())
      for (const TensorSpec& t : g.tensors) reader.read_f32(t.name, host.param(t.name));
    const testing::FixtureBatch fb = testing::fixture_batch(reader);
    const data::PairBatch batch = testing::padded_batch(fb.seqs, int32_t(config.pad_token_id), fb.row_len);
    const RewardOutput ref = cpu.forward_backward(batch, host);

    const Qwen3RewardModel gpu(config, opt, make_cuda_model_ops({nullptr, DType::F32, AttentionKind::Auto}));
    DeviceParams dev(host, DType::F32);
    const RewardOutput out = gpu.forward_backward(batch, dev);
    const double r = rel_l2(out.rewards, ref.rewards);
    printf("  checkpointing %d: rewards rel L2 %.3e, loss %.9g vs %.9g\n", int(ckpt), r, out.loss_sum, ref.loss_sum);
    EXPECT_LE(r, 1e-5);
    EXPECT_NEAR(out.loss_sum, ref.loss_sum, 1e-5 * std::abs(ref.loss_sum));
    EXPECT_EQ(out.real_pairs, ref.real_pairs);
    EXPECT_EQ(out.correct_pairs, ref.correct_pairs);
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

}  // namespace
}  // namespace zero::model
