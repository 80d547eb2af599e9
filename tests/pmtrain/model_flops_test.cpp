// pmtrain/model_flops.h against numbers worked out by hand (and Qwen's published non-embedding count), not
// against the code's own arithmetic.
#include <gtest/gtest.h>

#include "model/param_layout.h"
#include "model/qwen3_config.h"
#include "pmtrain/model_flops.h"

namespace zero::pmtrain {
namespace {

// configs/tiny_cpu.yaml's shape: hidden 64, intermediate 160, 2 layers, 4 heads (q_dim 64), 2 kv heads
// (kv_dim 32), head_dim 16; the vocabulary does not matter (the embedding is left out).
model::Qwen3Config tiny() {
  model::Qwen3Config c;
  c.vocab_size = 151669, c.hidden_size = 64, c.intermediate_size = 160, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 16;
  return c;
}

TEST(ModelFlops, NonEmbeddingParametersOfTheTinyShape) {
  // Per layer: q 64x64 + k 32x64 + v 32x64 + o 64x64 = 12288; gate, up, down 3 x 160x64 = 30720; norms
  // 64 + 64 + 16 + 16 = 160: 43168. Two layers 86336, final norm 64, score head 64: 86464.
  EXPECT_EQ(non_embedding_params(model::qwen3_rm_groups(tiny())), 86464);
}

TEST(ModelFlops, NonEmbeddingParametersOfQwen3_0_6B) {
  // Qwen's model card: 0.44B non-embedding. Per layer: q 2048x1024 + k, v 1024x1024 + o 1024x2048 = 6291456;
  // MLP 3 x 3072x1024 = 9437184; norms 1024 + 1024 + 128 + 128 = 2304: 15730944. x 28 = 440466432, plus the
  // final norm 1024 and the score head 1024.
  model::Qwen3Config c;
  c.vocab_size = 151936, c.hidden_size = 1024, c.intermediate_size = 3072, c.num_layers = 28;
  c.num_heads = 16, c.num_kv_heads = 8, c.head_dim = 128;
  EXPECT_EQ(non_embedding_params(model::qwen3_rm_groups(c)), 440468480);
}

TEST(ModelFlops, TrainingFlopsByHand) {
  // 2 pairs x 2 sequences x 64 tokens = 256 tokens: 6 x 86464 x 256 = 132808704, attention 6 x 2 layers x
  // 4 heads x 16 x 64 x 256 = 12582912.
  EXPECT_DOUBLE_EQ(training_model_flops(tiny(), 86464, 64, 256), 145391616.0);
  // No tokens, no FLOPs; the attention term grows with the sequence at a fixed token count.
  EXPECT_DOUBLE_EQ(training_model_flops(tiny(), 86464, 64, 0), 0.0);
  EXPECT_DOUBLE_EQ(training_model_flops(tiny(), 0, 128, 256), 25165824.0);
}

TEST(ModelFlops, UtilisationAgainstThePeakOfEveryDevice) {
  EXPECT_DOUBLE_EQ(model_flops_utilisation(494.5e12, 1.0, 989, 1), 0.5);   // half an H100 for a second
  EXPECT_DOUBLE_EQ(model_flops_utilisation(494.5e12, 1.0, 989, 2), 0.25);  // the same work on two
  EXPECT_DOUBLE_EQ(model_flops_utilisation(494.5e12, 2.0, 989, 1), 0.25);  // in twice the time
}

}  // namespace
}  // namespace zero::pmtrain
