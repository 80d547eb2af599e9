// STUB: the FlashAttention-2 kernels are written on another branch; the coordinator replaces this file
// with the real one at merge. Until then every call fails loudly (never a silent wrong answer).
#include "core/check.h"
#include "model/cuda/attention_kernels.h"

namespace zero::model::cuda_attention {

void forward(const void*, const void*, const void*, Elem, const AttentionShape&, const VarlenBatch&, void*, float*,
             cudaStream_t) {
  throw zero::Error("attention kernels not merged yet");
}
size_t backward_workspace_bytes(const AttentionShape&, const VarlenBatch&) {
  throw zero::Error("attention kernels not merged yet");
}
void backward(const void*, const void*, const void*, const void*, const void*, const float*, Elem,
              const AttentionShape&, const VarlenBatch&, void*, void*, void*, void*, size_t, cudaStream_t) {
  throw zero::Error("attention kernels not merged yet");
}

}  // namespace zero::model::cuda_attention
