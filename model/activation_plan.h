// Activation memory of one forward_backward, as the model's orchestration allocates it: the kept
// tensors of each layer (all of them; selective recompute's GEMM and attention outputs and statistics,
// with one layer's element-wise tensors rebuilt in backward; or, with full checkpointing, each layer's
// input and attention output and log-sum-exp, and one layer being recomputed),
// the residual stream, and the transient peak of one layer's backward. It replays the allocation
// order of reward_model.cpp and decoder_layer.cpp (alloc before the old tensor of a slot is freed,
// tensors freed at scope exit), so the peak is the peak of ModelOps' own byte count
// (ModelOps::peak_bytes), which the model tests compare with it exactly on the CPU backend.
//
// Dtypes: the CPU backend keeps everything in fp32; the GPU path keeps layer activations in bf16 and
// the residual stream, its gradient and the statistics (rstd, log-sum-exp) in fp32. Rewards are fp32.
// Scratch inside an op (the CPU's attention scores of one sequence and head, a bf16 weight widened to
// fp32) is not a ModelOps allocation and not counted here: see op_scratch_bytes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "model/activation_checkpointing.h"
#include "model/qwen3_config.h"

namespace zero::model {

struct ActivationDTypes {
  DType activations = DType::F32;  // a layer's kept tensors and their gradients
  DType residual = DType::F32;     // the residual stream x, a layer's h, and their gradients
  DType stats = DType::F32;        // rstd of the norms, attention log-sum-exp
};
inline constexpr ActivationDTypes kCpuActivations{};  // the CPU backend: fp32 throughout
inline constexpr ActivationDTypes kGpuActivations{DType::BF16, DType::F32, DType::F32};

struct ActivationPlan {
  size_t per_layer_forward = 0;     // bytes one layer's forward writes (every LayerActivations field)
  size_t per_layer_kept = 0;        // of those, what stays until the layer's backward (full: o and lse, or 0)
  size_t per_layer_recomputed = 0;  // bytes one layer's backward writes again (selective: a, qr, kr, b, m)
  size_t recomputed = 0;            // bytes every layer's backward writes again, with selective_layers
  int64_t full_layers = 0;          // layers recomputed (GEMMs included)
  int64_t attention_recomputed_layers = 0;  // of those, the layers whose attention forward runs again too
  size_t backward_transient = 0;  // one layer's backward temporaries at their peak
  size_t peak = 0;                // the whole forward_backward's peak of live activation bytes
};

// rows: token rows of the micro-batch on the backend (ModelOps::token_rows: the CPU's real tokens, a
// GPU's rounded up); seqs: sequences (2 x pairs); selective_layers: model.selective_layers
// (layer_checkpointing; per_layer_* are `mode`'s, recomputed and full_layers count the mix);
// recompute_attention: RewardModelOptions' (full layers keep no attention output).
ActivationPlan plan_activations(const Qwen3Config& c, int64_t rows, int64_t seqs, ActivationCheckpointing mode,
                                const ActivationDTypes& dt, int64_t selective_layers = 0,
                                bool recompute_attention = false);

// The peak of live activation bytes of one forward pass alone (Qwen3RewardModel::forward / queue_forward:
// an evaluation batch): the residual stream and the next layer's output, one layer's activations at a time
// (each field allocated before the last layer's is freed), the rewards. No checkpointing mode applies:
// nothing is kept for a backward.
size_t plan_forward_activations(const Qwen3Config& c, int64_t rows, int64_t seqs, const ActivationDTypes& dt);

// The CPU backend's largest scratch inside one op, outside ModelOps: the attention scores of one
// sequence and head (len x len fp32) or a bf16 weight widened to fp32, whichever is larger.
size_t cpu_op_scratch_bytes(const Qwen3Config& c, int64_t max_seq_len, bool bf16_weights);

// The CUDA backend's largest device scratch inside one op of a forward_backward (CudaModelOps takes it from
// the activation pool for the op's length, outside ModelOps' count; model/device_scratch.h): the norms' dw
// partials, the attention backward's workspace, the pooled head's partials and, with bf16 activations, a
// GEMM operand from the fp32 residual stream ([rows, hidden]) converted to bf16. tokens: the micro-batch's
// (rows = padded_token_rows(tokens)); seqs: its sequences; activations: the GEMMs' input dtype.
size_t gpu_op_scratch_bytes(const Qwen3Config& c, int64_t tokens, int64_t seqs, DType activations);

}  // namespace zero::model
