// The whole reward model on CudaModelOps (fp32 mode) against the same model on the CPU backend, on the
// shared tiny Qwen3 fixture (tests/fixtures/qwen3_rm_tiny, the HF-parity fixture) and its batch: rewards,
// loss and every parameter gradient within 1e-5 relative L2; and with activation checkpointing the GPU
// run repeats itself bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "checkpoint/safetensors.h"
#include "model/cuda/cuda_model_ops.h"
#include "model/param_access.h"
#include "model/qwen3_config.h"
#include "model/reward_model.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/model/model_test_util.h"

namespace zero::model {
namespace {

// Every group whole in device memory (fp32), mirrored from a DenseParams (tensors concatenated in
// GroupSpec order, as its flat regions are).
class DeviceParams final : public ParamAccess {
 public:
  explicit DeviceParams(const DenseParams& host) : groups_(host.groups()) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      const int64_t n = groups_[g].numel();
      params_.emplace_back(std::make_unique<zero::testing::DeviceBuffer>(sizeof(float) * size_t(n)));
      grads_.emplace_back(std::make_unique<zero::testing::DeviceBuffer>(sizeof(float) * size_t(n)));
      int64_t at = 0;
      for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
        const auto p = host.param(int(g), int(t));
        zero::testing::upload(params_[g]->as<float>() + at, p.data(), p.size());
        at += int64_t(p.size());
      }
    }
  }
  std::vector<TensorRef> acquire(int g) override { return views(g, *params_[g]); }
  void release(int) override {}
  void begin_backward() override {}
  std::vector<TensorRef> grad_buffers(int g) override { return views(g, *grads_[g]); }
  void grad_ready(int) override {}
  int num_pieces(int) override { return 1; }
  Piece acquire_piece(int, int) override { throw Error("whole groups only"); }
  void release_piece(int, int) override {}
  Piece grad_piece(int, int) override { throw Error("whole groups only"); }
  void piece_ready(int, int) override {}

  std::vector<float> grad(int g, int t) const {
    int64_t at = 0;
    for (int i = 0; i < t; ++i) at += groups_[g].tensors[i].numel();
    return zero::testing::download<float>(grads_[g]->as<float>() + at, size_t(groups_[g].tensors[t].numel()));
  }

 private:
  std::vector<TensorRef> views(int g, const zero::testing::DeviceBuffer& b) {
    std::vector<TensorRef> v;
    int64_t at = 0;
    for (const TensorSpec& t : groups_[g].tensors) {
      v.emplace_back(b.as<float>() + at, DType::F32, t.shape);
      at += t.numel();
    }
    return v;
  }
  std::vector<GroupSpec> groups_;
  std::vector<std::unique_ptr<zero::testing::DeviceBuffer>> params_, grads_;
};

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
    DeviceParams dev(host);
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
