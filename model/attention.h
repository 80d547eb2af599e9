// The shape of the reward model's attention, shared by the model and its backends: causal grouped-query
// softmax attention over variable-length sequences laid end to end in a token buffer (the real tokens of
// a batch, pads dropped), each sequence attending only within itself, minus its hidden span if it has one
// (a shared-prompt pair: core/math/attention_mask.h). Inputs are already projected, normed and rotated.
#pragma once
#include <cstdint>

namespace zero::model {

// Which attention a backend runs (model.attention). Reference: the plain per-sequence softmax.
// Flash: the FlashAttention-2 tiling (on the CPU its emulation, model/attention_tiled.h; on a GPU the
// tensor-core kernels where they apply, bf16 at head_dim 64/128, else the fp32-FMA ones). FlashFma: the
// same tiling on the GPU's fp32-FMA kernels only (slower; the fallback should the tensor-core path
// misbehave on some device); on the CPU it is Flash. FlashWide: Flash with the GPU's wide tensor-core
// kernels where the tensor-core path applies (FlashAttention-2's 128-row blocks; the same bits as Flash:
// model/cuda/attention_kernels.h), Flash elsewhere; on the CPU it is Flash. Auto: the backend's best:
// reference on the CPU (small models), flash on the GPU.
enum class AttentionKind : uint8_t { Auto, Flash, Reference, FlashFma, FlashWide };

struct AttentionShape {
  int64_t heads = 0;
  int64_t kv_heads = 0;  // kv head j serves q heads j*r .. j*r+r-1, r = heads / kv_heads
  int64_t head_dim = 0;
};

// The FLOPs counted for attention over `scores` query-key pairs (a causal sequence of L tokens has L (L + 1) / 2)
// at q_dim = heads x head_dim: Q K^T and P V forward (4 q_dim a score), and `passes` times that (forward 1;
// backward 2.5: it recomputes P and takes four products; both 3.5). The planner prices attention so, calibrate
// measures its rate so, and ModelOps declares its ops' work so (core/step_clock.h).
inline double attention_flops(double scores, double q_dim, double passes) { return 4.0 * scores * q_dim * passes; }
constexpr double kAttentionBackwardPasses = 2.5;
constexpr double kAttentionForwardBackwardPasses = 1.0 + kAttentionBackwardPasses;

}  // namespace zero::model
