// The host side of the attention kernels: argument checks (a clear zero::ConfigError before anything is
// launched), the workspace size, and the hand-over to the launchers in attention_kernels.cu.
#include "model/cuda/attention_kernels.h"

#include <initializer_list>
#include <limits>

#include "core/check.h"
#include "model/cuda/attention_grid.h"
#include "model/cuda/attention_launch.h"
#include "model/device_scratch.h"

namespace zero::model::cuda_attention {
namespace {

using device_scratch::kAttentionWorkspaceAlign;

void check_shape(const AttentionShape& s) {
  ZERO_REQUIRE(s.heads > 0 && s.kv_heads > 0, ConfigError, "attention kernels: heads {} and kv_heads {} must be positive",
               s.heads, s.kv_heads);
  ZERO_REQUIRE(s.heads % s.kv_heads == 0, ConfigError,
               "attention kernels: heads {} is not a multiple of kv_heads {} (grouped-query attention)", s.heads,
               s.kv_heads);
  ZERO_REQUIRE(s.head_dim >= 1 && s.head_dim <= kMaxHeadDim, ConfigError,
               "attention kernels: head_dim {} unsupported (1 to {})", s.head_dim, kMaxHeadDim);
}

void check_batch(const VarlenBatch& b) {
  ZERO_REQUIRE(b.num_seqs >= 0 && b.max_seqlen >= 0 && b.num_tokens >= 0, ConfigError,
               "attention kernels: num_seqs {}, max_seqlen {}, num_tokens {} must not be negative", b.num_seqs,
               b.max_seqlen, b.num_tokens);
  ZERO_REQUIRE(b.num_seqs == 0 || b.cu_seqlens != nullptr, ConfigError,
               "attention kernels: cu_seqlens is null for {} sequences", b.num_seqs);
  ZERO_REQUIRE(int64_t(b.max_seqlen) <= b.num_tokens, ConfigError,
               "attention kernels: max_seqlen {} exceeds num_tokens {}", b.max_seqlen, b.num_tokens);
}

// True when there is nothing to compute (no sequence or only empty ones).
bool empty(const VarlenBatch& b) { return b.num_seqs == 0 || b.num_tokens == 0 || b.max_seqlen == 0; }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Path::Auto resolved, and Path::Mma checked: the tensor-core kernels copy 16-byte vectors, so every
// tensor they read or write must start on a 16-byte boundary (packed rows of 64 or 128 bf16 keep it after;
// rows_aligned: so do v's, whatever its stride).
bool use_mma(Path path, Elem t, const AttentionShape& s, std::initializer_list<const void*> tensors, bool rows_aligned) {
  ZERO_REQUIRE(path == Path::Auto || path == Path::Fma || path == Path::Mma || path == Path::MmaWide, ConfigError,
               "attention kernels: unknown path {}", int(path));
  if (path == Path::Fma) return false;
  bool aligned = rows_aligned;
  for (const void* x : tensors) aligned = aligned && aligned16(x);
  const bool fits = mma_supported(t, s) && aligned;
  ZERO_REQUIRE(fits || path == Path::Auto, ConfigError,
               "attention kernels: the tensor-core path takes bf16 at head_dim 64 or 128 with 16-byte aligned "
               "tensors (got {}, head_dim {}, {})",
               t == Elem::BF16 ? "bf16" : "fp32", s.head_dim, aligned ? "aligned" : "a tensor not 16-byte aligned");
  return fits;
}

detail::Geometry geometry(const AttentionShape& s, const VarlenBatch& b, Elem t, int64_t v_stride,
                          int64_t dv_stride = 0) {
  ZERO_REQUIRE(t == Elem::F32 || t == Elem::BF16, ConfigError, "attention kernels: unknown element type {}", int(t));
  constexpr int64_t kMaxGrid = std::numeric_limits<int32_t>::max();
  const int64_t blocks = row_grid_size(b.num_seqs, s.heads, b.max_seqlen);
  ZERO_REQUIRE(blocks <= kMaxGrid && b.num_tokens * s.heads / 256 < kMaxGrid, ConfigError,
               "attention kernels: {} sequences x {} heads x {} query blocks is too large a grid", b.num_seqs,
               s.heads, blocks_of(b.max_seqlen, kBlockQ));
  for (const int64_t stride : {v_stride, dv_stride})
    ZERO_REQUIRE(stride == 0 || stride >= s.kv_heads * s.head_dim, ConfigError,
                 "attention kernels: a v or dv row stride of {} is shorter than its {} x {} elements a row", stride,
                 s.kv_heads, s.head_dim);
  detail::Geometry g;
  g.cu_seqlens = b.cu_seqlens;
  g.hidden = b.hidden;
  g.num_seqs = b.num_seqs, g.max_seqlen = b.max_seqlen, g.num_tokens = b.num_tokens;
  g.heads = s.heads, g.kv_heads = s.kv_heads, g.head_dim = s.head_dim;
  g.v_stride = v_stride, g.dv_stride = dv_stride;
  g.bf16 = t == Elem::BF16;
  return g;
}

// The tensor-core kernels' 16-byte loads and stores stay aligned from row to row only if the row strides
// keep them.
bool rows_aligned(std::initializer_list<int64_t> strides, Elem t) {
  bool ok = true;
  for (const int64_t stride : strides) ok = ok && stride * (t == Elem::BF16 ? 2 : 4) % 16 == 0;
  return ok;
}

}  // namespace

bool mma_supported(Elem t, const AttentionShape& s) { return t == Elem::BF16 && mma_head_dim(s.head_dim); }

void forward(const void* q, const void* k, const void* v, Elem t, const AttentionShape& s, const VarlenBatch& b,
             void* o, float* lse, cudaStream_t stream, Path path, int64_t v_stride) {
  check_shape(s);
  check_batch(b);
  detail::Geometry g = geometry(s, b, t, v_stride);
  if (empty(b)) return;
  ZERO_REQUIRE(q && k && v && o && lse, ConfigError, "attention forward: a null tensor (q {}, k {}, v {}, o {}, lse {})",
               q != nullptr, k != nullptr, v != nullptr, o != nullptr, lse != nullptr);
  g.mma = use_mma(path, t, s, {q, k, v, o}, rows_aligned({v_stride}, t));
  g.wide = g.mma && path == Path::MmaWide;
  detail::launch_forward(g, q, k, v, o, lse, stream);
}

size_t backward_workspace_bytes(const AttentionShape& s, const VarlenBatch& b) {
  check_shape(s);
  check_batch(b);
  return device_scratch::attention_workspace_bytes(b.num_tokens, s.heads);  // D, fp32 per (token, head)
}

void backward(const void* q, const void* k, const void* v, const void* o, const void* d_o, const float* lse, Elem t,
              const AttentionShape& s, const VarlenBatch& b, void* dq, void* dk, void* dv, void* workspace,
              size_t workspace_bytes, cudaStream_t stream, Path path, int64_t v_stride, int64_t dv_stride) {
  const size_t need = backward_workspace_bytes(s, b);
  detail::Geometry g = geometry(s, b, t, v_stride, dv_stride);
  if (empty(b)) return;
  ZERO_REQUIRE(q && k && v && o && d_o && lse && dq && dk && dv, ConfigError,
               "attention backward: a null tensor (q {}, k {}, v {}, o {}, d_o {}, lse {}, dq {}, dk {}, dv {})",
               q != nullptr, k != nullptr, v != nullptr, o != nullptr, d_o != nullptr, lse != nullptr, dq != nullptr,
               dk != nullptr, dv != nullptr);
  ZERO_REQUIRE(workspace != nullptr && workspace_bytes >= need, ConfigError,
               "attention backward: workspace of {} bytes given, backward_workspace_bytes says {}", workspace_bytes,
               need);
  ZERO_REQUIRE(reinterpret_cast<uintptr_t>(workspace) % kAttentionWorkspaceAlign == 0, ConfigError,
               "attention backward: workspace {} is not {}-byte aligned", workspace, kAttentionWorkspaceAlign);
  g.mma = use_mma(path, t, s, {q, k, v, o, d_o, dq, dk, dv}, rows_aligned({v_stride, dv_stride}, t));
  g.wide = g.mma && path == Path::MmaWide;
  detail::launch_backward(g, q, k, v, o, d_o, lse, static_cast<float*>(workspace), dq, dk, dv, stream);
}

}  // namespace zero::model::cuda_attention
