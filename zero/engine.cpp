#include "zero/engine.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "core/check.h"

namespace zero {

Engine::Engine(const EngineConfig& cfg, std::vector<GroupInfo> groups, Communicator& comm, DeviceOps& ops,
               TrackingAllocator& alloc)
    : cfg_(cfg), groups_(std::move(groups)), comm_(comm), ops_(ops), alloc_(alloc) {
  validate(cfg_);
  ZERO_REQUIRE(ops_.supports_storage(cfg_.param_dtype), ConfigError,
               "zero.param_dtype {} is not supported by the {} backend", dtype_name(cfg_.param_dtype), ops_.name());
  ZERO_REQUIRE(ops_.supports_storage(cfg_.accum_dtype), ConfigError,
               "zero.accum_dtype {} is not supported by the {} backend", dtype_name(cfg_.accum_dtype), ops_.name());
  ZERO_REQUIRE(comm_.supports_reduction(cfg_.reduce_dtype), ConfigError,
               "zero.reduce_dtype {} is not supported by the {} communicator (use fp32 or bf16)",
               dtype_name(cfg_.reduce_dtype), comm_.backend_name());
  rank_ = comm_.rank();
  world_ = comm_.world();
  part_ = make_partition(groups_, world_, cfg_.bucket_elements);
  const size_t G = groups_.size();

  params_ = Buffer(alloc_, sharded_params() ? part_.total_shard : part_.total_padded, cfg_.param_dtype,
                   MemCategory::Params);
  accum_ = Buffer(alloc_, sharded_grads() ? part_.total_shard : part_.total_padded, cfg_.accum_dtype,
                  MemCategory::Grads);
  const size_t opt = cfg_.stage == 0 ? part_.total_padded : part_.total_shard;
  master_ = Buffer(alloc_, opt, DType::F32, MemCategory::Master);
  m_ = Buffer(alloc_, opt, DType::F32, MemCategory::OptimM);
  v_ = Buffer(alloc_, opt, DType::F32, MemCategory::OptimV);
  // Grad views hold a whole bucket (the model writes a group at once); reductions go in chunks of at
  // most bucket_elements, so a group larger than a bucket (an embedding) needs no full-size send buffer.
  const size_t B = part_.max_bucket_padded;
  chunk_shard_ = std::min(B / world_, std::max<size_t>(1, cfg_.bucket_elements / world_));
  for (int s = 0; s < 2; ++s) {
    staging_[s] = Buffer(alloc_, B, cfg_.param_dtype, MemCategory::CommBuffers);
    send_[s] = Buffer(alloc_, chunk_shard_ * world_, cfg_.reduce_dtype, MemCategory::CommBuffers);
    recv_[s] = Buffer(alloc_, chunk_shard_, cfg_.reduce_dtype, MemCategory::CommBuffers);
  }

  offset_in_bucket_.assign(G, 0);
  for (const Bucket& b : part_.buckets) {
    size_t off = 0;
    for (int g : b.groups) {
      offset_in_bucket_[g] = off;
      off += part_.groups[g].padded;
    }
  }
  gathered_.resize(G);
  gather_handle_.resize(G);
  param_views_.resize(G);
  grad_views_.resize(G);
  bucket_ready_.assign(part_.buckets.size(), 0);
  if (!sharded_params()) {
    for (size_t g = 0; g < G; ++g)
      param_views_[g] = make_view(at(params_, part_.groups[g].full_offset), cfg_.param_dtype, int(g));
  }
}

Engine::~Engine() {
  // Unfinished collectives must complete before their buffers go away.
  for (auto& p : pending_) p.handle.reset();
  for (auto& h : gather_handle_) h.reset();
}

GroupView Engine::make_view(void* base, DType t, int g) const {
  GroupView v;
  const auto& L = part_.groups[g];
  for (size_t i = 0; i < groups_[g].tensors.size(); ++i)
    v.push_back({static_cast<char*>(base) + L.tensor_offsets[i] * dtype_size(t), t, groups_[g].tensors[i].numel});
  return v;
}

void Engine::check_group(int g, const char* what) const {
  ZERO_CHECK(g >= 0 && size_t(g) < groups_.size(), "{}: group {} out of range [0, {})", what, g, groups_.size());
}

void Engine::init_params(const std::function<void(int, int, float*)>& fill) {
  std::vector<float> full;  // transient host scratch, one tensor at a time
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
      full.assign(groups_[g].tensors[t].numel, 0.0f);
      fill(int(g), int(t), full.data());
      set_tensor(int(g), int(t), full.data());
    }
}

void Engine::set_tensor(int g, int t, const float* full) {
  check_group(g, "set_tensor");
  ZERO_CHECK(t >= 0 && size_t(t) < groups_[g].tensors.size(), "set_tensor: tensor {} out of range in group '{}'", t,
             groups_[g].name);
  const auto& L = part_.groups[g];
  const size_t t0 = L.tensor_offsets[t], t1 = t0 + groups_[g].tensors[t].numel;
  // The optimizer's range of this group, and (stage 3) the compute-parameter shard, intersected with the tensor.
  const OptimizerShard s = optimizer_shard(g);
  size_t lo = std::max(t0, s.begin), hi = std::min(t1, s.begin + s.count);
  if (lo < hi) ops_.copy_from_host(s.master + (lo - s.begin), DType::F32, full + (lo - t0), hi - lo);
  if (sharded_params()) {
    const size_t p0 = size_t(rank_) * L.shard;
    lo = std::max(t0, p0), hi = std::min(t1, p0 + L.shard);
    if (lo < hi) ops_.copy_from_host(at(params_, L.shard_offset + (lo - p0)), cfg_.param_dtype, full + (lo - t0), hi - lo);
  } else {
    ops_.copy_from_host(at(params_, L.full_offset + t0), cfg_.param_dtype, full, t1 - t0);
  }
}

OptimizerShard Engine::optimizer_shard(int g) const {
  check_group(g, "optimizer_shard");
  const auto& L = part_.groups[g];
  OptimizerShard s;
  size_t off;
  if (cfg_.stage == 0) {
    s.begin = 0;
    s.count = L.padded;
    off = L.full_offset;
  } else {
    s.begin = size_t(rank_) * L.shard;
    s.count = L.shard;
    off = L.shard_offset;
  }
  s.master = master_.as<float>() + off;
  s.m = m_.as<float>() + off;
  s.v = v_.as<float>() + off;
  return s;
}

// ---- micro-step protocol -------------------------------------------------------------------------

void Engine::begin_micro_step() {
  if (micro_ >= 0) {
    for (size_t b = 0; b < part_.buckets.size(); ++b)
      ZERO_REQUIRE(bucket_ready_[b] == int(part_.buckets[b].groups.size()), ConfigError,
                   "micro-step {}: grad_ready was not called for every group of bucket {} (first group '{}')",
                   micro_, b, groups_[part_.buckets[b].first_group()].name);
  }
  ZERO_REQUIRE(micro_ + 1 < cfg_.accum_steps, ConfigError,
               "begin_micro_step called {} times without step(); accumulation is {}", micro_ + 2, cfg_.accum_steps);
  ++micro_;
  std::fill(bucket_ready_.begin(), bucket_ready_.end(), 0);
  begin_forward();
}

void Engine::begin_forward() {
  backward_ = false;
  for (size_t g = 0; g < gathered_.size(); ++g) free_gathered(int(g));  // unused prefetches
}

void Engine::begin_backward() { backward_ = true; }

void Engine::start_gather(int g) {
  const auto& L = part_.groups[g];
  gathered_[g] = Buffer(alloc_, L.padded, cfg_.param_dtype, MemCategory::Gathered);
  gather_handle_[g] = comm_.all_gather_async(at(params_, L.shard_offset), gathered_[g].data(), L.shard,
                                             cfg_.param_dtype, backward_ ? "ag bwd" : "ag fwd");
}

int Engine::live_gathered() const {
  int n = 0;
  for (const auto& b : gathered_) n += !b.empty();
  return n;
}

void Engine::free_gathered(int g) {
  if (gather_handle_[g]) {
    gather_handle_[g]->wait();
    gather_handle_[g].reset();
  }
  gathered_[g].reset();
}

const GroupView& Engine::gather(int g) {
  check_group(g, "gather");
  if (!sharded_params()) return param_views_[g];
  if (gathered_[g].empty()) start_gather(g);
  gather_handle_[g]->wait();
  gather_handle_[g].reset();
  param_views_[g] = make_view(gathered_[g].data(), cfg_.param_dtype, g);
  // Prefetch the next groups in the current direction, never holding more than depth + 1.
  const int dir = backward_ ? -1 : 1;
  for (int i = 1; i <= cfg_.prefetch_depth; ++i) {
    const int h = g + dir * i;
    if (h < 0 || size_t(h) >= groups_.size()) break;
    if (!gathered_[h].empty()) continue;
    if (live_gathered() >= cfg_.prefetch_depth + 1) break;
    start_gather(h);
  }
  return param_views_[g];
}

void Engine::release(int g) {
  check_group(g, "release");
  if (sharded_params()) free_gathered(g);
}

// ---- gradients -------------------------------------------------------------------------------------

void Engine::acquire_slot(int bucket) {
  const int slot = bucket % 2;
  if (slot_bucket_[slot] == bucket && slot_state_[slot] == SlotState::Filling) return;
  while (slot_state_[slot] == SlotState::InFlight) complete_oldest();
  ZERO_CHECK(slot_state_[slot] == SlotState::Free, "bucket slot {} still filling bucket {} when bucket {} needs it",
             slot, slot_bucket_[slot], bucket);
  slot_state_[slot] = SlotState::Filling;
  slot_bucket_[slot] = bucket;
}

const GroupView& Engine::grad_view(int g) {
  check_group(g, "grad_view");
  const int b = part_.groups[g].bucket;
  acquire_slot(b);
  const auto& L = part_.groups[g];
  void* base = at(staging_[b % 2], offset_in_bucket_[g]);
  // The model writes the real elements only; padding must reduce as zero.
  ops_.zero(static_cast<char*>(base) + L.numel * dtype_size(cfg_.param_dtype), cfg_.param_dtype, L.padded - L.numel);
  grad_views_[g] = make_view(base, cfg_.param_dtype, g);
  return grad_views_[g];
}

void Engine::grad_ready(int g) {
  check_group(g, "grad_ready");
  ZERO_REQUIRE(!grad_views_[g].empty(), ConfigError, "grad_ready({}) without grad_view({})", g, g);
  if (cfg_.nan_guard) {
    for (size_t t = 0; t < grad_views_[g].size(); ++t) {
      const TensorView& tv = grad_views_[g][t];
      const size_t bad = ops_.count_nonfinite(tv.data, tv.dtype, tv.numel);
      if (bad == 0) continue;
      if (first_bad_group_ < 0) first_bad_group_ = g;
      fprintf(stderr, "zero: rank %d: %zu non-finite gradient values in group '%s' tensor '%s' (micro-step %d); "
              "the step will be skipped\n", rank_, bad, groups_[g].name.c_str(),
              groups_[g].tensors[t].name.c_str(), micro_);
    }
  }
  const int b = part_.groups[g].bucket;
  if (++bucket_ready_[b] == int(part_.buckets[b].groups.size())) launch_bucket(b);
  // Drive progress of collectives already in flight (MPI progresses only inside MPI calls).
  for (auto& p : pending_) p.handle->test();
}

void Engine::for_each_piece(const Bucket& B, size_t a, size_t n,
                            const std::function<void(int, size_t, size_t, size_t)>& fn) const {
  size_t co = 0;  // the group's start in the bucket's concatenated shard space
  for (int g : B.groups) {
    const size_t s = part_.groups[g].shard;
    const size_t lo = std::max(a, co), hi = std::min(a + n, co + s);
    if (lo < hi) fn(g, lo - co, lo - a, hi - lo);
    co += s;
  }
}

void Engine::pack_chunk(const Bucket& B, size_t a, size_t n, const std::function<void*(int)>& src, DType src_t,
                        void* send) {
  const size_t esz = dtype_size(src_t), rsz = dtype_size(cfg_.reduce_dtype);
  for (size_t r = 0; r < size_t(world_); ++r)
    for_each_piece(B, a, n, [&](int g, size_t in_shard, size_t in_chunk, size_t len) {
      const char* from = static_cast<const char*>(src(g)) + (r * part_.groups[g].shard + in_shard) * esz;
      ops_.copy(static_cast<char*>(send) + (r * n + in_chunk) * rsz, cfg_.reduce_dtype, from, src_t, len);
    });
}

int Engine::acquire_chunk_slot() {
  const int c = next_chunk_;
  next_chunk_ ^= 1;
  while (chunk_busy_[c]) complete_oldest();
  chunk_busy_[c] = true;
  return c;
}

void Engine::launch_bucket(int b) {
  const Bucket& B = part_.buckets[b];
  const int slot = b % 2;
  const DType pt = cfg_.param_dtype, at_ = cfg_.accum_dtype, rt = cfg_.reduce_dtype;
  auto push = [&](int chunk, bool last, CommHandle h, std::function<void()> done) {
    pending_.push_back({b, slot, chunk, last, std::move(h), std::move(done)});
  };

  if (!sharded_grads()) {
    for (int g : B.groups) {
      const auto& L = part_.groups[g];
      ops_.add(at(accum_, L.full_offset), at_, at(staging_[slot], offset_in_bucket_[g]), pt, L.padded);
    }
    slot_state_[slot] = SlotState::Free;  // the views are folded into the accumulator already
    if (!last_micro()) return;            // nothing to reduce before the accumulation boundary
    const size_t first = part_.groups[B.first_group()].full_offset;
    if (cfg_.stage == 0 && at_ == rt) {  // all-reduce the accumulator in place, whole bucket at once
      push(-1, true, comm_.all_reduce_async(at(accum_, first), B.padded, rt, ReduceOp::Sum, "ar"), nullptr);
      return;
    }
    if (cfg_.stage == 0) {  // through the send buffer in the reduction dtype, chunk by chunk
      const size_t cap = chunk_shard_ * size_t(world_);
      for (size_t a = 0; a < B.padded; a += cap) {
        const size_t n = std::min(cap, B.padded - a);
        const int c = acquire_chunk_slot();
        ops_.copy(send_[c].data(), rt, at(accum_, first + a), at_, n);
        push(c, a + n == B.padded, comm_.all_reduce_async(send_[c].data(), n, rt, ReduceOp::Sum, "ar"),
             [this, c, first, a, n] { ops_.copy(at(accum_, first + a), cfg_.accum_dtype, send_[c].data(), cfg_.reduce_dtype, n); });
      }
      return;
    }
    // Stage 1: reduce-scatter the full accumulator; each rank's result lands in its own slices.
    for (size_t a = 0; a < B.shard; a += chunk_shard_) {
      const size_t n = std::min(chunk_shard_, B.shard - a);
      const int c = acquire_chunk_slot();
      pack_chunk(B, a, n, [&](int g) { return at(accum_, part_.groups[g].full_offset); }, at_, send_[c].data());
      push(c, a + n == B.shard, comm_.reduce_scatter_async(send_[c].data(), recv_[c].data(), n, rt, ReduceOp::Sum, "rs"),
           [this, b, c, a, n] {
             for_each_piece(part_.buckets[b], a, n, [&](int g, size_t in_shard, size_t in_chunk, size_t len) {
               const auto& L = part_.groups[g];
               ops_.copy(at(accum_, L.full_offset + size_t(rank_) * L.shard + in_shard), cfg_.accum_dtype,
                         at(recv_[c], in_chunk), cfg_.reduce_dtype, len);
             });
           });
    }
    return;
  }
  // Stages 2-3: reduce-scatter this micro-step's bucket, chunk by chunk, into the shard accumulator.
  // The bucket's groups are consecutive, so its shard space is one contiguous run of the accumulator.
  slot_state_[slot] = SlotState::InFlight;
  const size_t dst = part_.groups[B.first_group()].shard_offset;
  for (size_t a = 0; a < B.shard; a += chunk_shard_) {
    const size_t n = std::min(chunk_shard_, B.shard - a);
    const int c = acquire_chunk_slot();
    pack_chunk(B, a, n, [&](int g) { return at(staging_[slot], offset_in_bucket_[g]); }, pt, send_[c].data());
    push(c, a + n == B.shard, comm_.reduce_scatter_async(send_[c].data(), recv_[c].data(), n, rt, ReduceOp::Sum, "rs"),
         [this, c, dst, a, n] { ops_.add(at(accum_, dst + a), cfg_.accum_dtype, at(recv_[c], 0), cfg_.reduce_dtype, n); });
  }
}

void Engine::complete_oldest() {
  ZERO_CHECK(!pending_.empty(), "no collective in flight");
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  p.handle->wait();
  if (p.on_done) p.on_done();
  if (p.chunk_slot >= 0) chunk_busy_[p.chunk_slot] = false;
  if (p.last && slot_state_[p.slot] == SlotState::InFlight && slot_bucket_[p.slot] == p.bucket) {
    slot_state_[p.slot] = SlotState::Free;
    slot_bucket_[p.slot] = -1;
  }
}

void Engine::complete_all() {
  while (!pending_.empty()) complete_oldest();
}

// ---- the optimizer step --------------------------------------------------------------------------

void* Engine::grad_for_optimizer(int g) const {
  const auto& L = part_.groups[g];
  switch (cfg_.stage) {
    case 0: return at(accum_, L.full_offset);
    case 1: return at(accum_, L.full_offset + size_t(rank_) * L.shard);
    default: return at(accum_, L.shard_offset);
  }
}

void Engine::zero_accumulators() { ops_.zero(accum_.data(), accum_.dtype(), accum_.count()); }

StepResult Engine::step(double loss_divisor) {
  ZERO_REQUIRE(loss_divisor > 0, ConfigError, "step: loss divisor must be positive (got {})", loss_divisor);
  ZERO_REQUIRE(micro_ == cfg_.accum_steps - 1, ConfigError, "step() after {} micro-steps; accumulation is {}",
               micro_ + 1, cfg_.accum_steps);
  for (size_t b = 0; b < part_.buckets.size(); ++b)
    ZERO_REQUIRE(bucket_ready_[b] == int(part_.buckets[b].groups.size()), ConfigError,
                 "step(): grad_ready was not called for every group of bucket {} (first group '{}')", b,
                 groups_[part_.buckets[b].first_group()].name);
  complete_all();
  for (size_t g = 0; g < gathered_.size(); ++g) free_gathered(int(g));
  micro_ = -1;

  // Norm of what this rank owns (stage 0 owns everything, identical on every rank), and the
  // finite flags, in one scalar reduction.
  double local_sq = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const OptimizerShard s = optimizer_shard(int(g));
    local_sq += ops_.sum_squares(grad_for_optimizer(int(g)), cfg_.accum_dtype, s.count);
  }
  double sums[2] = {cfg_.stage == 0 && rank_ != 0 ? 0.0 : local_sq, first_bad_group_ >= 0 ? 1.0 : 0.0};
  comm_.all_reduce_scalars(sums, 2, ReduceOp::Sum);
  StepResult r;
  r.grad_norm = std::sqrt(sums[0]) / loss_divisor;
  const bool any_bad = sums[1] > 0;
  if (any_bad || !std::isfinite(r.grad_norm)) {
    if (any_bad) {  // name the lowest rank that saw it, and its group
      const double G = double(groups_.size());
      double code = first_bad_group_ >= 0 ? rank_ * G + first_bad_group_ : std::numeric_limits<double>::max();
      comm_.all_reduce_scalars(&code, 1, ReduceOp::Min);
      r.bad_rank = int(code / G);
      r.bad_group = groups_[size_t(code - r.bad_rank * G)].name;
    } else {
      r.bad_group = "(after reduction)";
    }
    zero_accumulators();
    first_bad_group_ = -1;
    r.applied = false;
    r.step = step_;
    r.lr = cfg_.schedule.lr_at(step_ + 1);
    return r;
  }

  r.clip_coef = 1.0f;
  if (cfg_.clip_norm > 0) r.clip_coef = float(std::min(1.0, double(cfg_.clip_norm) / (r.grad_norm + 1e-6)));
  const float grad_scale = float(double(r.clip_coef) / loss_divisor);
  ++step_;
  r.lr = cfg_.schedule.lr_at(step_);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const OptimizerShard s = optimizer_shard(int(g));
    const auto& L = part_.groups[g];
    const char* grad = static_cast<const char*>(grad_for_optimizer(int(g)));
    const size_t gsz = dtype_size(cfg_.accum_dtype);
    // Each tensor's part of this rank's range, with its own weight-decay flag; padding is skipped.
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
      const size_t t0 = L.tensor_offsets[t], t1 = t0 + groups_[g].tensors[t].numel;
      const size_t lo = std::max(t0, s.begin), hi = std::min(t1, s.begin + s.count);
      if (lo >= hi) continue;
      const size_t o = lo - s.begin;
      ops_.adamw(s.master + o, grad + o * gsz, cfg_.accum_dtype, s.m + o, s.v + o, hi - lo, cfg_.adamw, r.lr, step_,
                 groups_[g].tensors[t].weight_decay, grad_scale);
    }
  }
  zero_accumulators();
  sync_params();
  r.applied = true;
  r.step = step_;
  return r;
}

void Engine::sync_params() {
  std::vector<CommHandle> handles;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const OptimizerShard s = optimizer_shard(int(g));
    const auto& L = part_.groups[g];
    switch (cfg_.stage) {
      case 0: ops_.copy(at(params_, L.full_offset), cfg_.param_dtype, s.master, DType::F32, s.count); break;
      case 3: ops_.copy(at(params_, L.shard_offset), cfg_.param_dtype, s.master, DType::F32, s.count); break;
      default: {  // stages 1-2: own slice, then all-gather the group in place
        void* mine = at(params_, L.full_offset + s.begin);
        ops_.copy(mine, cfg_.param_dtype, s.master, DType::F32, s.count);
        handles.push_back(comm_.all_gather_async(mine, at(params_, L.full_offset), L.shard, cfg_.param_dtype, "ag"));
      }
    }
  }
  for (auto& h : handles) h->wait();
}

std::vector<float> Engine::full_master(int g) {
  check_group(g, "full_master");
  const auto& L = part_.groups[g];
  const OptimizerShard s = optimizer_shard(g);
  std::vector<float> full(L.padded);
  if (cfg_.stage == 0) {
    ops_.copy_to_host(full.data(), s.master, DType::F32, L.padded);
  } else {  // gather the shards in backend memory, then bring the group over
    Buffer tmp(alloc_, L.padded, DType::F32, MemCategory::Other);
    comm_.all_gather(s.master, tmp.data(), L.shard, DType::F32);
    ops_.copy_to_host(full.data(), tmp.data(), DType::F32, L.padded);
  }
  full.resize(L.numel);
  return full;
}

}  // namespace zero
