// SwiGLU MLP of Qwen3: down_proj(silu(gate_proj(x)) * up_proj(x)), no biases.
#pragma once
#include <cstdint>

#include "model/tensor_views.h"

namespace zero::model {

struct MlpWeights {
  const float* gate = nullptr;  // [I, H]
  const float* up = nullptr;    // [I, H]
  const float* down = nullptr;  // [H, I]
};
struct MlpGrads {
  float* gate = nullptr;
  float* up = nullptr;
  float* down = nullptr;
};
// What backward needs besides the input.
struct MlpCache {
  Mat g;  // [I, N] gate_proj(x)
  Mat u;  // [I, N] up_proj(x)
  Mat m;  // [I, N] silu(g) * u
};

// x: [H, N] -> y: [H, N] (overwritten).
void mlp_forward(const MlpWeights& w, int64_t hidden, int64_t inter, const Mat& x, Mat& y, MlpCache& cache);
// dy: [H, N] -> dx: [H, N] (overwritten); weight gradients overwritten.
void mlp_backward(const MlpWeights& w, const MlpGrads& gw, int64_t hidden, int64_t inter, const Mat& x,
                  const MlpCache& cache, const Mat& dy, Mat& dx);

}  // namespace zero::model
