// The CPU backend of the reward model's ops: Eigen over host memory, fp32 math (bf16 weights widened,
// bf16 gradients rounded once), reference or tiled (FlashAttention-2 emulation) attention. Only the real tokens of a batch are computed.
#pragma once
#include <memory>

#include "model/model_ops.h"

namespace zero::model {

// attention: Auto and Reference run the reference attention, Flash the tiled emulation. threads: the math
// threads (OpenMP), which cut the work by its shape alone, so the bits are the same at any count
// (model/cpu/parallel.h). Making the ops turns Eigen's own GEMM threading off (Eigen::setNbThreads(1)):
// it orders sums by the thread count.
std::unique_ptr<ModelOps> make_cpu_model_ops(AttentionKind attention = AttentionKind::Auto, int threads = 1);

}  // namespace zero::model
