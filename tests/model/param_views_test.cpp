// How parameters reach the model: typed views and pieces. bf16 weights are widened inside the ops and bf16
// gradients rounded once (to nearest even) from the fp32 math, so a bf16 run equals an fp32 run on the
// same (bf16) values bit for bit, gradient by gradient up to that one rounding; an embedding handed out in
// pieces gives the whole-group path's numbers bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/param_access.h"
#include "model/param_layout.h"
#include "model/qwen3_config.h"
#include "model/reward_model.h"
#include "bf16_params.h"
#include "model_test_util.h"

namespace zero::model {
namespace {

using testing::Bf16Params;
using testing::bits;

class ParamViews : public ::testing::Test {
 protected:
  void SetUp() override {
    checkpoint::SafetensorsReader r(testing::fixture_file());
    config_ = load_hf_config(testing::fixture_dir() + "/config.json");
    params_ = std::make_unique<DenseParams>(qwen3_rm_groups(config_));
    for (const GroupSpec& g : params_->groups())
      for (const TensorSpec& t : g.tensors) r.read_f32(t.name, params_->param(t.name));
    const testing::FixtureBatch fb = testing::fixture_batch(r);
    batch_ = testing::packed_batch(fb.seqs, 0, 40, {5, 3, 1, 4, 0, 2});
  }

  Qwen3Config config_;
  std::unique_ptr<DenseParams> params_;
  data::PairBatch batch_;
};

TEST_F(ParamViews, Bf16ViewsAreWidenedAndGradientsRoundedOnce) {
  Bf16Params half(*params_);
  for (int g = 0; g < params_->num_groups(); ++g)  // the fp32 run sees the same (bf16) values
    for (size_t t = 0; t < params_->groups()[g].tensors.size(); ++t) {
      std::span<float> p = params_->param(g, int(t));
      for (size_t i = 0; i < p.size(); ++i) p[i] = float(half.param(g, t)[i]);
    }
  const Qwen3RewardModel m(config_);
  const RewardOutput full = m.forward_backward(batch_, *params_);
  const RewardOutput narrow = m.forward_backward(batch_, half);
  EXPECT_EQ(full.rewards, narrow.rewards);
  EXPECT_EQ(full.pairs.loss_sum, narrow.pairs.loss_sum);
  for (int g = 0; g < params_->num_groups(); ++g)
    for (size_t t = 0; t < params_->groups()[g].tensors.size(); ++t) {
      std::span<const float> want = params_->grad(g, int(t));
      int64_t differ = 0;
      for (size_t i = 0; i < want.size(); ++i) differ += bits(half.grad(g, t)[i]) != bits(bf16(want[i]));
      EXPECT_EQ(differ, 0) << params_->groups()[g].tensors[t].name;
    }
}

// The embedding handed out in pieces, cut as the engine cuts it (several world sizes and piece lengths,
// runs not aligned to embedding rows, gradients garbage beforehand): every result bit-identical to the
// whole-group path.
TEST_F(ParamViews, PiecesEqualTheWholeGroup) {
  const Qwen3RewardModel m(config_);
  const RewardOutput whole = m.forward_backward(batch_, *params_);
  for (const PieceLayout layout : {PieceLayout{1000, 1, 1}, PieceLayout{4999, 2, 1}, PieceLayout{7777, 3, 64},
                                   PieceLayout{333, 4, 64}, PieceLayout{12345, 3, 1}}) {
    SCOPED_TRACE(::testing::Message() << "piece " << layout.elems_per_rank << " x world " << layout.world);
    DenseParams split(qwen3_rm_groups(config_), layout);
    ASSERT_GT(split.num_pieces(0), 1);
    EXPECT_EQ(split.num_pieces(1), 1);  // only the embedding is splittable
    for (int g = 0; g < split.num_groups(); ++g)
      for (size_t t = 0; t < split.groups()[g].tensors.size(); ++t) {
        std::span<const float> src = params_->param(g, int(t));
        std::copy(src.begin(), src.end(), split.param(g, int(t)).begin());
        std::span<float> gr = split.grad(g, int(t));
        std::fill(gr.begin(), gr.end(), 12345.0f);
      }
    const RewardOutput r = m.forward_backward(batch_, split);
    EXPECT_EQ(r.rewards, whole.rewards);
    EXPECT_EQ(r.pairs.loss_sum, whole.pairs.loss_sum);
    for (int g = 0; g < split.num_groups(); ++g)
      for (size_t t = 0; t < split.groups()[g].tensors.size(); ++t) {
        std::span<const float> a = split.grad(g, int(t)), b = params_->grad(g, int(t));
        EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << split.groups()[g].tensors[t].name;
      }
    EXPECT_EQ(m.forward(batch_, split).rewards, whole.rewards);
  }
}

}  // namespace
}  // namespace zero::model
