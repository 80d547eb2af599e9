// ModelOps: allocation handles and the shape contract of every op, checked once for all backends.
#include "model/model_ops.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "model/attention.h"

namespace zero::model {

namespace {

// The work each op declares to the step clock (core/step_clock.h OpWork): every tensor it takes read or written
// once (a view: its own elements), and a linear layer's 2 x rows x in x out FLOPs.
double bytes_of(const TensorRef& t) { return double(t.numel()) * double(dtype_size(t.dtype)); }
template <class... More>
double bytes_of(const TensorRef& t, const More&... more) {
  return bytes_of(t) + bytes_of(more...);
}
double gemm_flops(const TensorRef& x, const TensorRef& w) {
  return 2.0 * double(x.rows()) * double(w.dim(0)) * double(w.dim(1));
}

// The work the linear gradients declare: each tensor read or written once (an accumulated dx read too).
OpWork input_grad_work(const TensorRef& dy, const TensorRef& w, const TensorRef& dx, bool accumulate) {
  return {bytes_of(dy, w, dx) + (accumulate ? bytes_of(dx) : 0), gemm_flops(dx, w)};
}
OpWork weight_grad_work(const TensorRef& x, const TensorRef& dy, const TensorRef& dw) {
  return {bytes_of(x, dy, dw), gemm_flops(x, dw)};
}

void check_weight(const TensorRef& w, int64_t numel, const char* what) {
  ZERO_CHECK(w.dtype == DType::F32 || w.dtype == DType::BF16, "{}: weights are fp32 or bf16, got {}", what,
             dtype_name(w.dtype));
  ZERO_CHECK(w.numel() == numel, "{}: weight of {} elements, expected {}", what, w.numel(), numel);
}
void check_f32(const TensorRef& t, int64_t numel, const char* what) {
  ZERO_CHECK(t.dtype == DType::F32 && t.numel() == numel, "{}: expected {} fp32 elements, got {} {}", what, numel,
             t.numel(), dtype_name(t.dtype));
}
// Runs ascending, disjoint, inside [0, numel).
void check_piece(const Piece& p, int64_t numel, const char* what) {
  ZERO_CHECK(p.dtype == DType::F32 || p.dtype == DType::BF16, "{}: pieces are fp32 or bf16, got {}", what,
             dtype_name(p.dtype));
  int64_t end = 0;
  for (const FlatRun& r : p.runs) {
    ZERO_CHECK(r.begin >= end && r.count >= 0 && r.begin + r.count <= numel,
               "{}: run [{}, {}) overlaps the previous one or leaves [0, {})", what, r.begin, r.begin + r.count, numel);
    end = r.begin + r.count;
  }
}
void check_same(const TensorRef& a, const TensorRef& b, const char* what) {
  ZERO_CHECK(a.dtype == b.dtype && a.rows() == b.rows() && a.row_elems() == b.row_elems(),
             "{}: shapes or dtypes differ ([{}, {}] {} vs [{}, {}] {})", what, a.rows(), a.row_elems(),
             dtype_name(a.dtype), b.rows(), b.row_elems(), dtype_name(b.dtype));
}
// Same shape, each fp32 or bf16 (ops whose inputs and outputs may differ in dtype: an fp32 residual
// normed into a bf16 activation, say).
void check_shape(const TensorRef& a, const TensorRef& b, const char* what) {
  ZERO_CHECK((a.dtype == DType::F32 || a.dtype == DType::BF16) && (b.dtype == DType::F32 || b.dtype == DType::BF16) &&
                 a.rows() == b.rows() && a.row_elems() == b.row_elems(),
             "{}: shapes differ or a dtype is neither fp32 nor bf16 ([{}, {}] {} vs [{}, {}] {})", what, a.rows(),
             a.row_elems(), dtype_name(a.dtype), b.rows(), b.row_elems(), dtype_name(b.dtype));
}

}  // namespace

Activation& Activation::operator=(Activation&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    ref_ = std::exchange(o.ref_, {});
  }
  return *this;
}

void Activation::reset() {
  if (owner_) {
    owner_->live_bytes_ -= size_t(ref_.numel()) * dtype_size(ref_.dtype);
    owner_->do_free(ref_.data);
  }
  owner_ = nullptr;
  ref_ = {};
}

Activation ModelOps::alloc(std::initializer_list<int64_t> shape, DType dtype) {
  TensorRef ref(nullptr, dtype, shape);
  ZERO_CHECK(ref.numel() >= 0, "alloc: negative dimension");
  const size_t bytes = size_t(ref.numel()) * dtype_size(dtype);
  ref.data = do_alloc(bytes);
  peak_bytes_ = std::max(peak_bytes_, live_bytes_ += bytes);
  return Activation(this, ref);
}

void ModelOps::to_host(const TensorRef& src, std::span<float> dst) {
  ZERO_CHECK(int64_t(dst.size()) <= src.numel(), "to_host: {} elements asked of a tensor of {}", dst.size(),
             src.numel());
  do_to_host(src, dst);
}

void ModelOps::begin_batch(const TokenPlan& plan, const RopeSpec& rope) {
  plan_ = &plan;
  do_begin_batch(plan, rope);
}

const TokenPlan& ModelOps::plan() const {
  ZERO_CHECK(plan_ != nullptr, "a token op before begin_batch");
  return *plan_;
}

void ModelOps::check_tokens(const TensorRef& t, int64_t features, const char* what, bool view_ok) const {
  ZERO_CHECK(t.rows() == token_rows(plan()) && t.row_elems() == features,
             "{}: expected [{}, {}] (token rows of this batch), got [{}, {}]", what, token_rows(plan()), features,
             t.rows(), t.row_elems());
  ZERO_CHECK(view_ok || t.dense(), "{}: a strided view (row stride {}, {} columns) where packed rows are expected", what,
             t.stride(), t.row_elems());
}

// w [out, in] (a weight, or a weight's gradient) against token tensors `outs` [rows, out] and `ins` [rows, in].
void ModelOps::check_linear(const TensorRef& w, const TensorRef& outs, const TensorRef& ins, const char* op,
                            const char* outs_name, const char* ins_name) const {
  ZERO_CHECK(w.rank == 2, "{}: weight of rank {}", op, w.rank);
  check_weight(w, w.dim(0) * w.dim(1), op);
  check_tokens(outs, w.dim(0), outs_name);
  check_tokens(ins, w.dim(1), ins_name);
}

void ModelOps::linear_forward(const TensorRef& x, const TensorRef& w, const TensorRef& y) {
  check_linear(w, y, x, "linear_forward", "linear_forward y", "linear_forward x");
  const StepClock::Scope timed(clock_, TimeCategory::Gemm, "linear_forward", {bytes_of(x, w, y), gemm_flops(x, w)});
  do_linear_forward(x, w, y);
}

void ModelOps::linear_forward_add(const TensorRef& x, const TensorRef& w, const TensorRef& residual,
                                  const TensorRef& y) {
  check_linear(w, y, x, "linear_forward_add", "linear_forward_add y", "linear_forward_add x");
  check_same(residual, y, "linear_forward_add residual");
  const StepClock::Scope timed(clock_, TimeCategory::Gemm, "linear_forward_add",
                               {bytes_of(x, w, residual, y), gemm_flops(x, w)});
  do_linear_forward_add(x, w, residual, y);
}

void ModelOps::do_linear_forward_add(const TensorRef& x, const TensorRef& w, const TensorRef& residual,
                                     const TensorRef& y) {
  do_linear_forward(x, w, y);
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "linear_forward_add (the add)",
                               {bytes_of(y, residual, y)});
  do_add(y, residual, y);
}

void ModelOps::linear_input_grad(const TensorRef& dy, const TensorRef& w, const TensorRef& dx, bool accumulate) {
  check_linear(w, dy, dx, "linear_input_grad", "linear_input_grad dy", "linear_input_grad dx");
  const StepClock::Scope timed(clock_, TimeCategory::Gemm, "linear_input_grad", input_grad_work(dy, w, dx, accumulate));
  do_linear_input_grad(dy, w, dx, accumulate);
}

void ModelOps::linear_weight_grad(const TensorRef& x, const TensorRef& dy, const TensorRef& dw) {
  check_linear(dw, dy, x, "linear_weight_grad", "linear_weight_grad dy", "linear_weight_grad x");
  const StepClock::Scope timed(clock_, TimeCategory::Gemm, "linear_weight_grad", weight_grad_work(x, dy, dw));
  do_linear_weight_grad(x, dy, dw);
}

void ModelOps::linear_backward(const TensorRef& x, const TensorRef& w, const TensorRef& dy, const TensorRef& dx,
                               bool accumulate, const TensorRef& dw) {
  check_linear(w, dy, dx, "linear_backward", "linear_backward dy", "linear_backward dx");
  check_linear(dw, dy, x, "linear_backward dw", "linear_backward dy", "linear_backward x");
  ZERO_CHECK(dw.dim(0) == w.dim(0) && dw.dim(1) == w.dim(1), "linear_backward: dw [{}, {}] for a weight [{}, {}]",
             dw.dim(0), dw.dim(1), w.dim(0), w.dim(1));
  const OpWork a = input_grad_work(dy, w, dx, accumulate), b = weight_grad_work(x, dy, dw);
  const StepClock::Scope timed(clock_, TimeCategory::Gemm, "linear_backward", {a.bytes + b.bytes, a.flops + b.flops});
  do_linear_backward(x, w, dy, dx, accumulate, dw);
}

void ModelOps::do_linear_backward(const TensorRef& x, const TensorRef& w, const TensorRef& dy, const TensorRef& dx,
                                  bool accumulate, const TensorRef& dw) {
  do_linear_input_grad(dy, w, dx, accumulate);
  do_linear_weight_grad(x, dy, dw);
}

void ModelOps::rmsnorm_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                               const TensorRef& rstd) {
  check_weight(w, x.row_elems(), "rmsnorm_forward");
  check_shape(x, y, "rmsnorm_forward");
  check_f32(rstd, x.rows(), "rmsnorm_forward rstd");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "rmsnorm_forward", {bytes_of(x, w, y, rstd)});
  do_rmsnorm_forward(x, w, eps, y, rstd);
}

namespace {
// The arguments of rmsnorm_backward and rmsnorm_backward_add (`what`: the op's name for the messages).
void check_rmsnorm_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                            const TensorRef& dx, const TensorRef& dw, const std::string& what) {
  check_weight(w, x.row_elems(), what.c_str());
  check_weight(dw, x.row_elems(), (what + " dw").c_str());
  check_shape(x, dy, (what + " dy").c_str());
  check_shape(x, dx, (what + " dx").c_str());
  check_f32(rstd, x.rows(), (what + " rstd").c_str());
}
}  // namespace

void ModelOps::rmsnorm_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                                const TensorRef& dx, const TensorRef& dw) {
  check_rmsnorm_backward(x, w, rstd, dy, dx, dw, "rmsnorm_backward");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "rmsnorm_backward", {bytes_of(x, w, rstd, dy, dx, dw)});
  do_rmsnorm_backward(x, w, rstd, dy, dx, dw);
}

void ModelOps::rmsnorm_backward_add(const TensorRef& x, const TensorRef& w, const TensorRef& rstd, const TensorRef& dy,
                                    const TensorRef& residual, const TensorRef& dx, const TensorRef& dw) {
  check_rmsnorm_backward(x, w, rstd, dy, dx, dw, "rmsnorm_backward_add");
  check_same(dx, residual, "rmsnorm_backward_add residual");
  ZERO_CHECK(dx.data != residual.data, "rmsnorm_backward_add: dx must not be the residual it adds");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "rmsnorm_backward_add",
                               {bytes_of(x, w, rstd, dy, residual, dx, dw)});
  do_rmsnorm_backward_add(x, w, rstd, dy, residual, dx, dw);
}

void ModelOps::do_rmsnorm_backward_add(const TensorRef& x, const TensorRef& w, const TensorRef& rstd,
                                       const TensorRef& dy, const TensorRef& residual, const TensorRef& dx,
                                       const TensorRef& dw) {
  do_rmsnorm_backward(x, w, rstd, dy, dx, dw);
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "rmsnorm_backward_add (the add)",
                               {bytes_of(dx, residual, dx)});
  do_add(dx, residual, dx);
}

void ModelOps::qk_norm_rope_forward(const TensorRef& x, const TensorRef& w, float eps, const TensorRef& y,
                                    const TensorRef& rstd) {
  const int64_t d = w.numel(), heads = d > 0 ? x.row_elems() / d : 0;
  check_tokens(x, heads * d, "qk_norm_rope_forward x", true);
  check_tokens(y, heads * d, "qk_norm_rope_forward y");
  check_shape(x, y, "qk_norm_rope_forward");
  check_f32(rstd, x.rows() * heads, "qk_norm_rope_forward rstd");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "qk_norm_rope_forward", {bytes_of(x, w, y, rstd)});
  do_qk_norm_rope_forward(x, w, eps, y, rstd);
}

void ModelOps::qk_norm_rope_backward(const TensorRef& x, const TensorRef& w, const TensorRef& rstd,
                                     const TensorRef& dy, const TensorRef& dx, const TensorRef& dw) {
  const int64_t d = w.numel(), heads = d > 0 ? x.row_elems() / d : 0;
  check_tokens(x, heads * d, "qk_norm_rope_backward x", true);
  check_tokens(dy, heads * d, "qk_norm_rope_backward dy");
  check_weight(dw, d, "qk_norm_rope_backward dw");
  check_shape(x, dy, "qk_norm_rope_backward dy");
  check_shape(x, dx, "qk_norm_rope_backward dx");
  check_f32(rstd, x.rows() * heads, "qk_norm_rope_backward rstd");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "qk_norm_rope_backward",
                               {bytes_of(x, w, rstd, dy, dx, dw)});
  do_qk_norm_rope_backward(x, w, rstd, dy, dx, dw);
}

void ModelOps::attention_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const AttentionShape& s,
                                 const TensorRef& o, const TensorRef& lse) {
  ZERO_CHECK(s.heads > 0 && s.kv_heads > 0 && s.heads % s.kv_heads == 0, "attention: {} heads over {} kv heads",
             s.heads, s.kv_heads);
  check_tokens(q, s.heads * s.head_dim, "attention_forward q");
  check_tokens(k, s.kv_heads * s.head_dim, "attention_forward k");
  check_tokens(v, s.kv_heads * s.head_dim, "attention_forward v", true);
  check_tokens(o, s.heads * s.head_dim, "attention_forward o");
  check_same(k, v, "attention_forward v");
  check_same(q, o, "attention_forward o");
  check_f32(lse, q.rows() * s.heads, "attention_forward lse");
  const StepClock::Scope timed(clock_, TimeCategory::Attention, "attention_forward",
                               {bytes_of(q, k, v, o, lse), attention_flops(attention_scores(plan()), double(q.row_elems()), 1)});
  do_attention_forward(q, k, v, s, o, lse);
}

void ModelOps::attention_backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                                  const TensorRef& d_o, const TensorRef& lse, const AttentionShape& s,
                                  const TensorRef& dq, const TensorRef& dk, const TensorRef& dv) {
  ZERO_CHECK(s.heads > 0 && s.kv_heads > 0 && s.heads % s.kv_heads == 0, "attention: {} heads over {} kv heads",
             s.heads, s.kv_heads);
  check_tokens(q, s.heads * s.head_dim, "attention_backward q");
  check_tokens(k, s.kv_heads * s.head_dim, "attention_backward k");
  check_tokens(v, s.kv_heads * s.head_dim, "attention_backward v", true);
  for (const TensorRef* t : {&o, &d_o, &dq}) check_tokens(*t, s.heads * s.head_dim, "attention_backward o, d_o or dq");
  check_tokens(dk, s.kv_heads * s.head_dim, "attention_backward dk");
  check_tokens(dv, s.kv_heads * s.head_dim, "attention_backward dv", true);
  check_same(k, v, "attention_backward v");
  check_same(q, o, "attention_backward o");
  check_same(q, d_o, "attention_backward d_o");
  check_same(q, dq, "attention_backward dq");
  check_same(k, dk, "attention_backward dk");
  check_same(k, dv, "attention_backward dv");
  check_f32(lse, q.rows() * s.heads, "attention_backward lse");
  const StepClock::Scope timed(clock_, TimeCategory::Attention, "attention_backward",
                               {bytes_of(q, k, v, o, d_o, lse, dq, dk, dv),
                                attention_flops(attention_scores(plan()), double(q.row_elems()), kAttentionBackwardPasses)});
  do_attention_backward(q, k, v, o, d_o, lse, s, dq, dk, dv);
}

void ModelOps::swiglu_forward(const TensorRef& g, const TensorRef& u, const TensorRef& m) {
  check_same(g, u, "swiglu_forward u");
  check_same(g, m, "swiglu_forward m");
  ZERO_CHECK(m.dense(), "swiglu_forward: m is a strided view");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "swiglu_forward", {bytes_of(g, u, m)});
  do_swiglu_forward(g, u, m);
}

void ModelOps::swiglu_backward(const TensorRef& g, const TensorRef& u, const TensorRef& dm, const TensorRef& dg,
                               const TensorRef& du) {
  check_same(g, u, "swiglu_backward u");
  check_same(g, dm, "swiglu_backward dm");
  check_same(g, dg, "swiglu_backward dg");
  check_same(g, du, "swiglu_backward du");
  ZERO_CHECK(dm.dense(), "swiglu_backward: dm is a strided view");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "swiglu_backward", {bytes_of(g, u, dm, dg, du)});
  do_swiglu_backward(g, u, dm, dg, du);
}

void ModelOps::add(const TensorRef& a, const TensorRef& b, const TensorRef& out) {
  check_same(a, b, "add");
  check_same(a, out, "add out");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "add", {bytes_of(a, b, out)});
  do_add(a, b, out);
}

void ModelOps::embedding_forward(const Piece& table, int64_t vocab, const TensorRef& x) {
  check_piece(table, vocab * x.row_elems(), "embedding_forward");
  check_tokens(x, x.row_elems(), "embedding_forward x");
  // A table row read for each token row written.
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "embedding_forward",
                               {bytes_of(x) + double(x.numel()) * double(dtype_size(table.dtype))});
  do_embedding_forward(table, x);
}

void ModelOps::embedding_backward(const TensorRef& dx, int64_t vocab, const Piece& dtable) {
  check_piece(dtable, vocab * dx.row_elems(), "embedding_backward");
  check_tokens(dx, dx.row_elems(), "embedding_backward dx");
  // Each token's gradient row read, and at most a table row written for each.
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "embedding_backward",
                               {bytes_of(dx) + double(dx.numel()) * double(dtype_size(dtable.dtype))});
  do_embedding_backward(dx, dtable);
}

void ModelOps::pooled_head_forward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                                   const TensorRef& rewards) {
  const int64_t H = x.row_elems();
  check_tokens(x, H, "pooled_head_forward x");
  check_weight(norm_w, H, "pooled_head_forward norm");
  check_weight(score, H, "pooled_head_forward score");
  check_f32(rewards, plan().num_seqs(), "pooled_head_forward rewards");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "pooled_head_forward");
  do_pooled_head_forward(x, norm_w, score, eps, rewards);
}

void ModelOps::pooled_head_backward(const TensorRef& x, const TensorRef& norm_w, const TensorRef& score, float eps,
                                    const TensorRef& drewards, const TensorRef& dx, const TensorRef& d_norm_w,
                                    const TensorRef& d_score) {
  const int64_t H = x.row_elems();
  check_tokens(x, H, "pooled_head_backward x");
  check_shape(x, dx, "pooled_head_backward dx");
  check_weight(norm_w, H, "pooled_head_backward norm");
  check_weight(score, H, "pooled_head_backward score");
  check_weight(d_norm_w, H, "pooled_head_backward d_norm");
  check_weight(d_score, H, "pooled_head_backward d_score");
  check_f32(drewards, plan().num_seqs(), "pooled_head_backward drewards");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "pooled_head_backward");
  do_pooled_head_backward(x, norm_w, score, eps, drewards, dx, d_norm_w, d_score);
}

void ModelOps::pair_loss(const TensorRef& rewards, const PairLossInputs& in, const TensorRef& drewards) {
  check_f32(rewards, 2 * int64_t(in.mask.size()), "pair_loss rewards");
  ZERO_CHECK(in.margin.empty() || in.margin.size() == in.mask.size(), "pair_loss: {} margins for {} pairs",
             in.margin.size(), in.mask.size());
  ZERO_CHECK(in.group.empty() ? in.groups == 0 : in.group.size() == in.mask.size() && in.groups > 0,
             "pair_loss: {} group ids in {} groups for {} pairs", in.group.size(), in.groups, in.mask.size());
  for (const int32_t g : in.group)
    ZERO_CHECK(g >= 0 && g < in.groups, "pair_loss: group {} outside the {} groups", g, in.groups);
  if (!drewards.empty()) check_f32(drewards, rewards.numel(), "pair_loss drewards");
  const StepClock::Scope timed(clock_, TimeCategory::Elementwise, "pair_loss");
  do_pair_loss(rewards, in, drewards);
  ++pending_pair_losses_;
}

std::vector<PairStats> ModelOps::take_pair_stats_each() {
  const int64_t calls = pending_pair_losses_;
  pending_pair_losses_ = 0;
  std::vector<PairStats> each = do_take_pair_stats();
  ZERO_CHECK(int64_t(each.size()) == calls, "take_pair_stats: {} pair_loss calls but {} sums", calls, each.size());
  return each;
}

PairStats ModelOps::take_pair_stats() { return PairStats::sum(take_pair_stats_each()); }

}  // namespace zero::model
