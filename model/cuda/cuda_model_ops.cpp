// CudaModelOps: the ModelOps hooks as cuBLASLt GEMMs and the kernels of model_kernels.cu on one stream.
#include "model/cuda/cuda_model_ops.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/math/bf16.h"
#include "cuda/check.h"
#include "cuda/host_wait.h"
#include "cuda/kernel_elem.h"
#include "cuda/kernels.h"
#include "model/cpu/rope.h"
#include "model/cuda/attention_kernels.h"
#include "model/cuda/batch_upload.h"
#include "model/cuda/lt_gemm.h"
#include "model/cuda/model_kernels.h"
#include "model/device_scratch.h"

namespace zero::model {

namespace {

namespace K = cuda_kernels;
using cuda_gemm::GemmKey;
using cuda_gemm::GemmShape;

K::Elem elem(DType t) {
  ZERO_CHECK(t == DType::F32 || t == DType::BF16, "the CUDA model ops take fp32 or bf16 tensors, got {}", dtype_name(t));
  return t == DType::F32 ? K::Elem::F32 : K::Elem::BF16;
}
// The engine's copy converts the GEMM operands and outputs (one conversion kernel for both layers), between the
// model's two types (elem's check).
void convert(void* dst, DType dt, const void* src, DType st, int64_t n, cudaStream_t s) {
  elem(dt);
  elem(st);
  kernels::copy(dst, kernels::elem_of(dt, "convert"), src, kernels::elem_of(st, "convert"), size_t(n), s);
}
size_t bytes_of(DType t, int64_t n) { return size_t(n) * dtype_size(t); }

// The norm kernels keep a row in registers, up to kMaxNormDim elements.
void check_norm_dim(int64_t dim, const char* what) {
  ZERO_CHECK(dim > 0 && dim <= K::kMaxNormDim, "{}: a row of {} elements is outside what the norm kernels hold (1 to {})",
             what, dim, K::kMaxNormDim);
}

class CudaModelOpsImpl final : public CudaModelOps {
 public:
  CudaModelOpsImpl(const CudaModelOptions& o, HostWaitGuard host_wait)
      : stream_(o.stream),
        waiter_(o.stream, std::move(host_wait)),
        act_(o.activation_dtype),
        attention_path_(o.attention == AttentionKind::FlashFma ? cuda_attention::Path::Fma : cuda_attention::Path::Auto),
        attention_wide_(o.attention == AttentionKind::FlashWide),
        // cudaFree waits for the device, which the stream may hold behind a collective: the guarded wait first.
        pool_([this] { waiter_.wait(); }),
        gemm_(o.stream) {
    ZERO_REQUIRE(act_ == DType::F32 || act_ == DType::BF16, ConfigError,
                 "CUDA model ops: activations are fp32 or bf16, not {}", dtype_name(act_));
    ZERO_REQUIRE(o.attention != AttentionKind::Reference, ConfigError,
                 "model.attention: reference is the CPU backend's attention; the CUDA backend runs flash or flash_fma "
                 "(or auto)");
    CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&pair_in_uploaded_, cudaEventDisableTiming));
    grow_pair_sums(kSumCalls);
  }
  ~CudaModelOpsImpl() override {
    // Not cudaStreamSynchronize(stream_): the stream is borrowed (CudaOps owns it), and pmtrain's Trainer
    // destroys its CudaOps before its model, so the handle may already be destroyed here.
    CUDA_WARN(cudaDeviceSynchronize());
    if (uploaded_) CUDA_WARN(cudaEventDestroy(uploaded_));
    if (d_batch_) CUDA_WARN(cudaFree(d_batch_));
    if (h_batch_) CUDA_WARN(cudaFreeHost(h_batch_));
    if (pair_in_uploaded_) CUDA_WARN(cudaEventDestroy(pair_in_uploaded_));
    if (d_pair_in_) CUDA_WARN(cudaFree(d_pair_in_));
    if (h_pair_in_) CUDA_WARN(cudaFreeHost(h_pair_in_));
    if (d_sums_) CUDA_WARN(cudaFree(d_sums_));
    if (h_sums_) CUDA_WARN(cudaFreeHost(h_sums_));
  }

  const char* name() const override { return "cuda"; }
  DType activation_dtype() const override { return act_; }
  int64_t token_rows(const TokenPlan& plan) const override { return plan.padded_tokens; }
  cudaStream_t stream() const override { return stream_; }
  const cuda_pool::PoolStats& pool_stats() const override { return pool_.stats(); }
  size_t peak_scratch_bytes() const override { return scratch_peak_; }
  size_t gemm_plans() const override { return gemm_.cached_plans(); }

 protected:
  void* do_alloc(size_t bytes) override { return pool_.alloc(bytes); }
  void do_free(void* p) override { pool_.free(p); }
  void do_release_cached_memory() override { pool_.release_cached(); }  // the pool's hook waits under the guard

  void do_to_host(const TensorRef& src, std::span<float> dst) override {
    if (dst.empty()) return;
    waiter_.before_pageable_copy();
    if (src.dtype == DType::F32) {
      CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data, dst.size_bytes(), cudaMemcpyDeviceToHost, stream_));
      waiter_.wait();
      return;
    }
    ZERO_CHECK(src.dtype == DType::BF16, "to_host: {} tensor", dtype_name(src.dtype));
    std::vector<uint16_t> bits(dst.size());
    CUDA_CHECK(cudaMemcpyAsync(bits.data(), src.data, bits.size() * 2, cudaMemcpyDeviceToHost, stream_));
    waiter_.wait();
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = math::bf16_to_f32(bits[i]);
  }

  void do_begin_batch(const TokenPlan& plan, const RopeSpec& rope) override {
    ZERO_CHECK(rope.head_dim > 0 && rope.head_dim % 2 == 0, "RoPE head_dim {} must be even and positive", rope.head_dim);
    const TokensById g = group_tokens_by_id(plan.tokens);
    // The CPU backend's tables (same angles, same bits), laid out [token, head_dim / 2].
    const cpu::RopeTable rt = cpu::make_rope_table(plan.positions, rope.head_dim, rope.theta);
    const int64_t N = plan.num_tokens(), S = plan.num_seqs(), A = plan.num_attention_seqs(), U = int64_t(g.ids.size());
    const bool hidden = !plan.hidden.empty();
    layout_ = cuda_batch::batch_layout(N, S, A, hidden, U, rope.head_dim);
    rope_head_dim_ = rope.head_dim;
    num_ids_ = U;
    // The previous batch's upload must have left the pinned buffer before it is rewritten (long done unless
    // the host runs a whole micro-batch ahead of the device).
    waiter_.wait_if_pending(uploaded_);
    if (layout_.total > batch_capacity_) {
      if (d_batch_) CUDA_CHECK(cudaFree(d_batch_));  // synchronises: no kernel reads the old plan any more
      if (h_batch_) CUDA_CHECK(cudaFreeHost(h_batch_));
      d_batch_ = nullptr, h_batch_ = nullptr, batch_capacity_ = 0;
      CUDA_CHECK(cudaMalloc(&d_batch_, layout_.total));
      CUDA_CHECK(cudaMallocHost(&h_batch_, layout_.total));
      batch_capacity_ = layout_.total;
    }
    auto put = [&](size_t offset, const void* src, size_t bytes) {
      if (bytes) std::memcpy(h_batch_ + offset, src, bytes);
    };
    put(layout_.tokens, plan.tokens.data(), 4 * size_t(N));
    put(layout_.cu_seqlens, plan.cu_seqlens.data(), 4 * size_t(A + 1));
    if (hidden) put(layout_.hidden, plan.hidden.data(), 4 * size_t(2 * A));
    put(layout_.pooled, plan.pooled.data(), 4 * size_t(S));
    put(layout_.by_id, g.by_id.data(), 4 * size_t(N));
    put(layout_.ids, g.ids.data(), 4 * size_t(U));
    put(layout_.id_start, g.id_start.data(), 4 * size_t(U + 1));
    put(layout_.cos, rt.cos.data(), 4 * size_t(rt.cos.size()));
    put(layout_.sin, rt.sin.data(), 4 * size_t(rt.sin.size()));
    if (layout_.total)
      CUDA_CHECK(cudaMemcpyAsync(d_batch_, h_batch_, layout_.total, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaEventRecord(uploaded_, stream_));
  }

  // ---- GEMMs ------------------------------------------------------------------------------------------
  void do_linear_forward(const TensorRef& x, const TensorRef& w, const TensorRef& y) override {
    const int64_t N = plan().num_tokens();
    if (N == 0) return;
    gemm(cuda_gemm::linear_forward_shape(N, w.dim(1), w.dim(0)), w, x, y, false);
  }
  // The residual added in the GEMM's epilogue (C = residual, D = y) when cuBLASLt writes y's dtype from
  // these inputs (the fp32 residual stream from bf16 or fp32 activations); otherwise GEMM, then add.
  void do_linear_forward_add(const TensorRef& x, const TensorRef& w, const TensorRef& residual,
                             const TensorRef& y) override {
    const int64_t N = plan().num_tokens();
    const GemmShape shape = cuda_gemm::linear_forward_shape(N, w.dim(1), w.dim(0));
    if (N == 0 || x.dtype != act_ || w.dtype != act_ || cuda_gemm::gemm_output_type(act_, y.dtype) != y.dtype) {
      ModelOps::do_linear_forward_add(x, w, residual, y);
      return;
    }
    gemm_.run(GemmKey{shape, act_, y.dtype}, w.data, x.data, residual.data, y.data, 1.0f);
  }
  void do_linear_input_grad(const TensorRef& dy, const TensorRef& w, const TensorRef& dx, bool accumulate) override {
    const int64_t N = plan().num_tokens();
    if (N == 0) return;
    gemm(cuda_gemm::linear_input_grad_shape(N, w.dim(1), w.dim(0)), w, dy, dx, accumulate);
  }
  void do_linear_weight_grad(const TensorRef& x, const TensorRef& dy, const TensorRef& dw) override {
    const int64_t N = plan().num_tokens();
    if (N == 0) {  // no tokens: the gradient is zero (it is overwritten either way)
      CUDA_CHECK(cudaMemsetAsync(dw.data, 0, bytes_of(dw.dtype, dw.numel()), stream_));
      return;
    }
    gemm(cuda_gemm::linear_weight_grad_shape(N, dw.dim(1), dw.dim(0)), x, dy, dw, false);
  }
  // dy not in the GEMMs' input dtype (bf16 mode: o_proj's and down_proj's fp32 dy) is converted once, into a
  // scratch both GEMMs read (gpu_op_scratch_bytes' operand), not by each GEMM: a pass and a launch fewer.
  void do_linear_backward(const TensorRef& x, const TensorRef& w, const TensorRef& dy, const TensorRef& dx,
                          bool accumulate, const TensorRef& dw) override {
    if (dy.dtype == act_ || !dy.dense() || plan().num_tokens() == 0)
      return ModelOps::do_linear_backward(x, w, dy, dx, accumulate, dw);
    const Scratch converted(*this, bytes_of(act_, dy.numel()));
    convert(converted.get(), act_, dy.data, dy.dtype, dy.numel(), stream_);
    TensorRef dy_in = dy;
    dy_in.data = converted.get();
    dy_in.dtype = act_;
    do_linear_input_grad(dy_in, w, dx, accumulate);
    do_linear_weight_grad(x, dy_in, dw);
  }

  // ---- norms ------------------------------------------------------------------------------------------
  void do_rmsnorm_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                          const TensorRef& rstd) override {
    const int64_t dim = x.row_elems();
    check_norm_dim(dim, "rmsnorm_forward");
    K::norm_forward(x.data, elem(x.dtype), w.data, elem(w.dtype), plan().num_tokens(), dim, eps, y.data,
                    elem(y.dtype), rstd.as<float>(), nullptr, nullptr, 1, stream_);
  }
  void do_rmsnorm_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                           const TensorRef& dx, const TensorRef& dw) override {
    token_norm_backward(x, w, rstd, dy, nullptr, dx, dw, "rmsnorm_backward");
  }
  void do_rmsnorm_backward_add(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                               const TensorRef& residual, const TensorRef& dx, const TensorRef& dw) override {
    token_norm_backward(x, w, rstd, dy, &residual, dx, dw, "rmsnorm_backward_add");
  }
  // The backward of a norm over token rows, with the residual added as dx is stored when one is given.
  void token_norm_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                           const TensorRef* residual, const TensorRef& dx, const TensorRef& dw, const char* what) {
    const int64_t dim = x.row_elems(), rows = plan().num_tokens();
    check_norm_dim(dim, what);
    Scratch partials(*this, device_scratch::norm_partials_bytes(rows, dim));
    K::norm_backward(x.data, elem(x.dtype), w.data, elem(w.dtype), rstd.as<const float>(), dy.data, elem(dy.dtype),
                     rows, dim, dx.data, elem(dx.dtype), partials.as<float>(), dw.data, elem(dw.dtype), nullptr,
                     nullptr, 1, stream_, 0, 0, residual ? residual->data : nullptr,
                     residual ? elem(residual->dtype) : K::Elem::F32);
  }
  void do_qk_norm_rope_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                               const TensorRef& rstd) override {
    const int64_t d = w.numel(), heads = x.row_elems() / d;
    check_rope(d, "qk_norm_rope_forward");
    K::norm_forward(x.data, elem(x.dtype), w.data, elem(w.dtype), plan().num_tokens() * heads, d, eps, y.data,
                    elem(y.dtype), rstd.as<float>(), batch<float>(layout_.cos), batch<float>(layout_.sin), heads,
                    stream_, x.stride());
  }
  void do_qk_norm_rope_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                                const TensorRef& dx, const TensorRef& dw) override {
    const int64_t d = w.numel(), heads = x.row_elems() / d, rows = plan().num_tokens() * heads;
    check_rope(d, "qk_norm_rope_backward");
    Scratch partials(*this, device_scratch::norm_partials_bytes(rows, d));
    K::norm_backward(x.data, elem(x.dtype), w.data, elem(w.dtype), rstd.as<const float>(), dy.data, elem(dy.dtype),
                     rows, d, dx.data, elem(dx.dtype), partials.as<float>(), dw.data, elem(dw.dtype),
                     batch<float>(layout_.cos), batch<float>(layout_.sin), heads, stream_, x.stride(), dx.stride());
  }

  // ---- attention (the FlashAttention-2 kernels) --------------------------------------------------------
  // The kernels' path for these tensors: flash_wide's where the tensor-core path applies, else the kind's.
  cuda_attention::Path attention_path(cuda_attention::Elem t, const AttentionShape& s) const {
    return attention_wide_ && cuda_attention::mma_supported(t, s) ? cuda_attention::Path::MmaWide : attention_path_;
  }
  void do_attention_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const AttentionShape& s,
                            const TensorRef& o, const TensorRef& lse) override {
    const cuda_attention::Elem t = attention_elem({&q, &k, &v, &o});
    cuda_attention::forward(q.data, k.data, v.data, t, s, varlen(), o.data, lse.as<float>(), stream_,
                            attention_path(t, s), v.stride());
  }
  void do_attention_backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                             const TensorRef& d_o, const TensorRef& lse, const AttentionShape& s, const TensorRef& dq,
                             const TensorRef& dk, const TensorRef& dv) override {
    const cuda_attention::Elem t = attention_elem({&q, &k, &v, &o, &d_o, &dq, &dk, &dv});
    const cuda_attention::VarlenBatch b = varlen();
    const size_t ws = cuda_attention::backward_workspace_bytes(s, b);
    Scratch workspace(*this, ws);
    cuda_attention::backward(q.data, k.data, v.data, o.data, d_o.data, lse.as<const float>(), t, s, b, dq.data,
                             dk.data, dv.data, workspace.get(), ws, stream_, attention_path(t, s), v.stride(),
                             dv.stride());
  }

  // ---- element-wise -----------------------------------------------------------------------------------
  void do_swiglu_forward(const TensorRef& g, const TensorRef& u, const TensorRef& m) override {
    K::swiglu_forward({plan().num_tokens(), g.row_elems(), g.stride(), u.stride(), 0, 0}, g.data, u.data, m.data,
                      elem(g.dtype), stream_);
  }
  void do_swiglu_backward(const TensorRef& g, const TensorRef& u, const TensorRef& dm, const TensorRef& dg,
                          const TensorRef& du) override {
    K::swiglu_backward({plan().num_tokens(), g.row_elems(), g.stride(), u.stride(), dg.stride(), du.stride()}, g.data,
                       u.data, dm.data, dg.data, du.data, elem(g.dtype), stream_);
  }
  void do_add(const TensorRef& a, const TensorRef& b, const TensorRef& out) override {
    K::add(a.data, b.data, out.data, elem(a.dtype), plan().num_tokens() * a.row_elems(), stream_);
  }

  // ---- embedding --------------------------------------------------------------------------------------
  void do_embedding_forward(const Piece& table, const TensorRef& x) override {
    for (const FlatRun& run : table.runs)
      K::embedding_forward(run.data, elem(table.dtype), run.begin, run.count, batch<int32_t>(layout_.tokens),
                           plan().num_tokens(), x.row_elems(), x.data, elem(x.dtype), stream_);
  }
  void do_embedding_backward(const TensorRef& dx, const Piece& dtable) override {
    for (const FlatRun& run : dtable.runs)
      K::embedding_backward(dx.data, elem(dx.dtype), dx.row_elems(), batch<int32_t>(layout_.by_id),
                            batch<int32_t>(layout_.ids), batch<int32_t>(layout_.id_start), num_ids_, run.data,
                            elem(dtable.dtype), run.begin, run.count, stream_);
  }

  // ---- the head and the loss --------------------------------------------------------------------------
  void do_pooled_head_forward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                              const TensorRef& rewards) override {
    check_norm_dim(x.row_elems(), "pooled_head_forward");
    K::pooled_head_forward(x.data, elem(x.dtype), x.row_elems(), batch<int32_t>(layout_.pooled), plan().num_seqs(),
                           norm_w.data, elem(norm_w.dtype), score.data, elem(score.dtype), eps, rewards.as<float>(),
                           stream_);
  }
  void do_pooled_head_backward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                               const TensorRef& drewards, const TensorRef& dx, const TensorRef& d_norm_w,
                               const TensorRef& d_score) override {
    const int64_t H = x.row_elems(), S = plan().num_seqs();
    Scratch partials(*this, device_scratch::pooled_head_partials_bytes(S, H));
    K::pooled_head_backward(x.data, elem(x.dtype), H, batch<int32_t>(layout_.pooled), S, norm_w.data,
                            elem(norm_w.dtype), score.data, elem(score.dtype), eps, drewards.as<const float>(),
                            dx.data, elem(dx.dtype), dx.rows(), partials.as<float>(), d_norm_w.data,
                            elem(d_norm_w.dtype), d_score.data, elem(d_score.dtype), stream_);
  }

  void do_pair_loss(const TensorRef& rewards, const PairLossInputs& in, const TensorRef& drewards) override {
    const int64_t P = int64_t(in.mask.size());
    // One upload of [margins (P floats, when given) | groups (P int32, when given) | mask (P bytes)]: the
    // 4-byte words first, for their alignment.
    const size_t margin_bytes = sizeof(float) * in.margin.size(), group_bytes = sizeof(int32_t) * in.group.size();
    const size_t mask_at = margin_bytes + group_bytes, bytes = mask_at + size_t(P);
    if (bytes > pair_in_capacity_) {
      if (d_pair_in_) CUDA_CHECK(cudaFree(d_pair_in_));  // synchronises: no kernel reads the old inputs any more
      if (h_pair_in_) CUDA_CHECK(cudaFreeHost(h_pair_in_));
      d_pair_in_ = nullptr, h_pair_in_ = nullptr, pair_in_capacity_ = 0;
      CUDA_CHECK(cudaMalloc(&d_pair_in_, bytes));
      CUDA_CHECK(cudaMallocHost(&h_pair_in_, bytes));
      pair_in_capacity_ = bytes;
    }
    // From pinned memory: a pageable source may make the driver synchronise with the stream.
    if (P) {
      waiter_.wait_if_pending(pair_in_uploaded_);  // the previous inputs have left the staging buffer
      if (margin_bytes) std::memcpy(h_pair_in_, in.margin.data(), margin_bytes);
      if (group_bytes) std::memcpy(h_pair_in_ + margin_bytes, in.group.data(), group_bytes);
      std::memcpy(h_pair_in_ + mask_at, in.mask.data(), size_t(P));
      CUDA_CHECK(cudaMemcpyAsync(d_pair_in_, h_pair_in_, bytes, cudaMemcpyHostToDevice, stream_));
      CUDA_CHECK(cudaEventRecord(pair_in_uploaded_, stream_));
    }
    // The call's sums take 1 + groups slots; the buffers hold kSumCalls calls' worth before a read-back.
    const int64_t need = 1 + int64_t(in.groups);
    if (sums_capacity_ < kSumCalls * need) grow_pair_sums(kSumCalls * need);
    if (sums_used_ + need > sums_capacity_) fold_pair_sums();  // a long accumulation: read the slots back, go on
    K::pair_loss(rewards.as<const float>(), reinterpret_cast<const uint8_t*>(d_pair_in_ + mask_at),
                 margin_bytes ? reinterpret_cast<const float*>(d_pair_in_) : nullptr, P, in.center,
                 drewards.empty() ? nullptr : drewards.as<float>(), d_sums_ + sums_used_, stream_,
                 group_bytes ? reinterpret_cast<const int32_t*>(d_pair_in_ + margin_bytes) : nullptr, in.groups);
    sums_used_ += need;
    call_groups_.push_back(in.groups);
  }

  std::vector<PairStats> do_take_pair_stats() override {
    fold_pair_sums();
    return std::exchange(pair_sums_, {});
  }

 private:
  void fold_pair_sums() {
    if (sums_used_ == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(h_sums_, d_sums_, sizeof(K::PairLossSums) * size_t(sums_used_), cudaMemcpyDeviceToHost,
                               stream_));
    waiter_.wait();
    int64_t at = 0;
    for (const int32_t groups : call_groups_) {
      pair_sums_.push_back(PairStats::of_groups(h_sums_ + at, groups));
      at += 1 + groups;
    }
    call_groups_.clear();
    sums_used_ = 0;
  }
  // Room for `slots` sums (the queued ones read back first; cudaFree would wait for them anyway).
  void grow_pair_sums(int64_t slots) {
    fold_pair_sums();
    if (d_sums_) CUDA_CHECK(cudaFree(d_sums_));
    if (h_sums_) CUDA_CHECK(cudaFreeHost(h_sums_));
    d_sums_ = nullptr, h_sums_ = nullptr, sums_capacity_ = 0;
    CUDA_CHECK(cudaMalloc(&d_sums_, sizeof(K::PairLossSums) * size_t(slots)));
    CUDA_CHECK(cudaMallocHost(&h_sums_, sizeof(K::PairLossSums) * size_t(slots)));
    sums_capacity_ = slots;
  }

  // Device scratch from the pool for the length of one op (the stream orders its reuse).
  class Scratch {
   public:
    Scratch(CudaModelOpsImpl& ops, size_t bytes) : ops_(ops), bytes_(bytes), p_(ops.pool_.alloc(bytes)) {
      ops_.scratch_live_ += bytes_;
      ops_.scratch_peak_ = std::max(ops_.scratch_peak_, ops_.scratch_live_);
    }
    ~Scratch() {
      ops_.pool_.free(p_);
      ops_.scratch_live_ -= bytes_;
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    void* get() const { return p_; }
    template <class T> T* as() const { return static_cast<T*>(p_); }

   private:
    CudaModelOpsImpl& ops_;
    size_t bytes_;
    void* p_;
  };

  template <class T> T* batch(size_t offset) const { return reinterpret_cast<T*>(d_batch_ + offset); }

  void check_rope(int64_t d, const char* what) const {
    ZERO_CHECK(d == rope_head_dim_, "{}: norm weight of {} elements, but the batch's RoPE tables are for head_dim {}",
               what, d, rope_head_dim_);
    check_norm_dim(d, what);
  }

  cuda_attention::VarlenBatch varlen() const {
    const TokenPlan& p = plan();
    return {batch<int32_t>(layout_.cu_seqlens), int32_t(p.num_attention_seqs()), p.max_seqlen, p.num_tokens(),
            p.hidden.empty() ? nullptr : batch<int32_t>(layout_.hidden)};
  }
  static cuda_attention::Elem attention_elem(std::initializer_list<const TensorRef*> ts) {
    const DType t = (*ts.begin())->dtype;
    for (const TensorRef* x : ts)
      ZERO_CHECK(x->dtype == t, "attention: q, k, v, o and their gradients share one dtype ({} and {})", dtype_name(t),
                 dtype_name(x->dtype));
    return elem(t) == K::Elem::F32 ? cuda_attention::Elem::F32 : cuda_attention::Elem::BF16;
  }

  // D (dest) = op(A) op(B) (+ D when accumulating). Operands not in the mode's GEMM input type are converted
  // into scratch first; a destination cuBLASLt cannot write from these inputs goes through fp32 scratch.
  void gemm(const GemmShape& shape, const TensorRef& a, const TensorRef& b, const TensorRef& dest, bool accumulate) {
    const DType in = act_;
    auto operand = [&](const TensorRef& t, std::optional<Scratch>& s) -> const void* {
      if (t.dtype == in) return t.data;
      s.emplace(*this, bytes_of(in, t.numel()));
      convert(s->get(), in, t.data, t.dtype, t.numel(), stream_);
      return s->get();
    };
    std::optional<Scratch> sa, sb, sd;
    const void* pa = operand(a, sa);
    const void* pb = operand(b, sb);
    const GemmKey key{shape, in, cuda_gemm::gemm_output_type(in, dest.dtype)};
    const float beta = accumulate ? 1.0f : 0.0f;
    if (key.out == dest.dtype) {
      gemm_.run(key, pa, pb, dest.data, beta);
      return;
    }
    sd.emplace(*this, bytes_of(key.out, dest.numel()));
    if (accumulate) convert(sd->get(), key.out, dest.data, dest.dtype, dest.numel(), stream_);
    gemm_.run(key, pa, pb, sd->get(), beta);
    convert(dest.data, dest.dtype, sd->get(), key.out, dest.numel(), stream_);
  }

  cudaStream_t stream_;
  StreamWaiter waiter_;  // every host wait on stream_ (it may be stalled behind the engine's collectives)
  DType act_;
  cuda_attention::Path attention_path_;  // model.attention: flash_fma keeps the tensor cores out
  bool attention_wide_;                  // flash_wide: the wide tensor-core kernels where the tensor cores apply
  cuda_pool::ActivationPool pool_;  // before gemm_ and the buffers: destroyed last
  size_t scratch_live_ = 0, scratch_peak_ = 0;  // Scratch's bytes held now, and at most
  cuda_gemm::LtGemm gemm_;
  cuda_batch::BatchLayout layout_;
  int64_t rope_head_dim_ = 0, num_ids_ = 0;
  char* d_batch_ = nullptr;  // the plan on the device (layout_)
  char* h_batch_ = nullptr;  // its pinned staging copy
  size_t batch_capacity_ = 0;
  cudaEvent_t uploaded_ = nullptr;  // recorded after the upload of h_batch_
  char* d_pair_in_ = nullptr;  // the pair loss's margins and mask on the device
  char* h_pair_in_ = nullptr;  // their pinned staging copy
  size_t pair_in_capacity_ = 0;
  cudaEvent_t pair_in_uploaded_ = nullptr;
  // Each pair_loss writes its sums (the total, then each group's) into the next slots; take_pair_stats (or
  // full slots) reads them back at once, in call order, so a step's micro-batches queue without a host wait.
  static constexpr int64_t kSumCalls = 64;  // calls between read-backs, at the most
  K::PairLossSums* d_sums_ = nullptr;
  K::PairLossSums* h_sums_ = nullptr;
  int64_t sums_capacity_ = 0, sums_used_ = 0;
  std::vector<int32_t> call_groups_;  // the groups of each call in the slots
  std::vector<PairStats> pair_sums_;  // folded slots since the last take, one per pair_loss
};

}  // namespace

std::unique_ptr<CudaModelOps> make_cuda_model_ops(const CudaModelOptions& options, HostWaitGuard host_wait) {
  return std::make_unique<CudaModelOpsImpl>(options, std::move(host_wait));
}

}  // namespace zero::model
