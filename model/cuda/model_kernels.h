// Launchers of the reward model's CUDA kernels (model_kernels.cu), each queued on the given stream. A plain
// interface (device pointers, element counts, per-tensor element types) whose only project headers are
// core/math's, so nvcc compiles it. Every kernel calls the per-element formulas of core/math (the CPU model
// calls the same ones), keeps statistics in fp32, and sums in a fixed order: no atomics anywhere, so two
// runs of the same inputs give the same bits. Launch errors are thrown as zero::Error through CUDA_CHECK.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "core/math/pair_loss_math.h"

namespace zero::model::cuda_kernels {

enum class Elem : int { F32 = 0, BF16 = 1 };  // each tensor in its own type; math is fp32

constexpr int kThreads = 256;  // every kernel's block (whole warps: the sums are a warp's butterfly, then warps)
// The widest norm row: 48 elements a thread of a block in registers (Qwen3's hidden sizes are 1024 to 8192).
constexpr int64_t kMaxNormDim = 48 * kThreads;

// Blocks of the backward of a norm over `rows` rows of `dim`: each writes one fp32 partial of dw ([blocks,
// dim] scratch), which norm_backward then sums over blocks in a fixed order. A function of rows and dim alone
// (never of the device), so every GPU sums alike.
int norm_partial_blocks(int64_t rows, int64_t dim);

// RMSNorm of each row of `dim` elements: y = w * (x * rstd), rstd [rows] fp32. With rope (cos, sin not
// null: [tokens, dim / 2] fp32 tables, row r is head r % heads of token r / heads), the normed row is then
// rotated (rotate_half) before it is stored: q_norm / k_norm + RoPE in one pass. x_ld: elements from one
// token's x row to the next (0: packed, heads * dim with RoPE, dim without); wider when x is a column view
// of the fused q/k/v projection. y, dy are packed.
void norm_forward(const void* x, Elem xt, const void* w, Elem wt, int64_t rows, int64_t dim, float eps, void* y,
                  Elem yt, float* rstd, const float* cos, const float* sin, int64_t heads, cudaStream_t s,
                  int64_t x_ld = 0);
// Its backward: dx overwritten, dw = the sum over rows of dy * xhat (through `partials`,
// norm_partial_blocks(rows, dim) * dim floats of device scratch), stored in dw's type. With rope, dy is rotated
// back first. dx_ld: dx's row stride as x_ld is x's. With a residual (laid out as dx), dx = its value + the
// norm's input gradient (the residual stream's gradient passing the norm by), in one pass.
void norm_backward(const void* x, Elem xt, const void* w, Elem wt, const float* rstd, const void* dy, Elem dyt,
                   int64_t rows, int64_t dim, void* dx, Elem dxt, float* partials, void* dw, Elem dwt,
                   const float* cos, const float* sin, int64_t heads, cudaStream_t s, int64_t x_ld = 0,
                   int64_t dx_ld = 0, const void* residual = nullptr, Elem residual_t = Elem::F32);

// m = silu(g) * u; its backward du = dm * silu(g), dg = dm * u * silu'(g). One type for all. Over `rows` rows
// of `cols` elements; g, u, dg and du rows start ld_* elements apart (the halves of the fused gate/up GEMM's
// output: ld 2 * cols), m and dm rows are packed (ld cols).
struct SwigluRows {
  int64_t rows = 0, cols = 0;
  int64_t ld_g = 0, ld_u = 0, ld_dg = 0, ld_du = 0;
};
// Columns and strides multiples of 16 bytes' worth of elements on 16-byte aligned tensors: 8 bf16 or 4 fp32
// elements a thread at once (swiglu_vector_width: that width, else 1); the same bits either way.
int swiglu_vector_width(const SwigluRows& r, Elem t, std::initializer_list<const void*> tensors);
void swiglu_forward(const SwigluRows& r, const void* g, const void* u, void* m, Elem t, cudaStream_t s);
void swiglu_backward(const SwigluRows& r, const void* g, const void* u, const void* dm, void* dg, void* du, Elem t,
                     cudaStream_t s);
// 8 bf16 or 4 fp32 elements a thread (16 bytes) when n is a multiple of that and every tensor 16-byte
// aligned, else 1: the width the element-wise launchers use (the same bits either way).
int packed_width(Elem t, int64_t n, std::initializer_list<const void*> tensors);
// out = a + b (out may alias a or b).
void add(const void* a, const void* b, void* out, Elem t, int64_t n, cudaStream_t s);

// Embedding over one run of the table's flat elements [run_begin, run_begin + run_count): every token's
// part of its row that lies in the run, x[t, :] = table[tokens[t], :].
void embedding_forward(const void* run, Elem rt, int64_t run_begin, int64_t run_count, const int32_t* tokens,
                       int64_t num_tokens, int64_t hidden, void* x, Elem xt, cudaStream_t s);
// The run overwritten with the sum of dx's rows of the tokens of each id, in token order (by_id: token
// indices sorted by id, stable; ids: the distinct ids ascending; id_start [num_ids + 1]).
void embedding_backward(const void* dx, Elem dxt, int64_t hidden, const int32_t* by_id, const int32_t* ids,
                        const int32_t* id_start, int64_t num_ids, void* run, Elem rt, int64_t run_begin,
                        int64_t run_count, cudaStream_t s);

// rewards[q] = score . final_norm(x[pooled[q]]) for q < seqs.
void pooled_head_forward(const void* x, Elem xt, int64_t hidden, const int32_t* pooled, int64_t seqs,
                         const void* norm_w, Elem nt, const void* score, Elem st, float eps, float* rewards,
                         cudaStream_t s);
// dx [rows, hidden] overwritten (zero except at the pooled rows); d_norm, d_score: sums over sequences
// through `partials` (2 * seqs * hidden floats of device scratch).
void pooled_head_backward(const void* x, Elem xt, int64_t hidden, const int32_t* pooled, int64_t seqs,
                          const void* norm_w, Elem nt, const void* score, Elem st, float eps, const float* drewards,
                          void* dx, Elem dxt, int64_t rows, float* partials, void* d_norm, Elem dnt, void* d_score,
                          Elem dst, cudaStream_t s);

// The pairwise loss over pairs (2i chosen, 2i + 1 rejected), in fp64 on one thread (a handful of pairs per
// micro-batch): core/math/pair_loss_math.h's loop, the CPU's formulas in the CPU's order. margin and
// drewards may be null. out: [1 + groups] sums, the total, then each group's (group: [pairs] or null).
using PairLossSums = math::PairLossSums;
void pair_loss(const float* rewards, const uint8_t* pair_mask, const float* margin, int64_t pairs, double center,
               float* drewards, PairLossSums* out, cudaStream_t s, const int32_t* group = nullptr,
               int32_t groups = 0);

}  // namespace zero::model::cuda_kernels
