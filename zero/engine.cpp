#include "zero/engine.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "zero/parallel_parts.h"
#include "zero/step_traffic.h"

namespace zero {

Engine::Engine(const EngineConfig& cfg, std::vector<GroupInfo> groups, Communicator& comm, DeviceOps& ops,
               TrackingAllocator& alloc, Communicator* replicas)
    : cfg_(cfg), groups_(std::move(groups)), comm_(comm), replicas_(replicas), ops_(ops), alloc_(alloc) {
  validate(cfg_);
  ZERO_REQUIRE(ops_.supports_storage(cfg_.param_dtype), ConfigError,
               "zero.param_dtype {} is not supported by the {} backend", dtype_name(cfg_.param_dtype), ops_.name());
  ZERO_REQUIRE(ops_.supports_storage(cfg_.accum_dtype), ConfigError,
               "zero.accum_dtype {} is not supported by the {} backend", dtype_name(cfg_.accum_dtype), ops_.name());
  // Gradients are packed into the send buffers by the backend's copy, so it must store the wire dtype too.
  ZERO_REQUIRE(ops_.supports_storage(cfg_.reduce_dtype), ConfigError,
               "zero.reduce_dtype {} cannot be packed by the {} backend (use fp32 or bf16)",
               dtype_name(cfg_.reduce_dtype), ops_.name());
  ZERO_REQUIRE(comm_.supports_reduction(cfg_.reduce_dtype), ConfigError,
               "zero.reduce_dtype {} is not supported by the {} communicator (use fp32 or bf16)",
               dtype_name(cfg_.reduce_dtype), comm_.backend_name());
  rank_ = comm_.rank();
  world_ = comm_.world();
  data_rank_ = rank_, data_world_ = world_;
  if (replicated()) {
    // The accumulator goes on the wire across groups in the reduce dtype (replica_reduction_buffered), as it
    // is when that is its own dtype (fixed point included: exact).
    ZERO_REQUIRE(replicas_->supports_reduction(cfg_.reduce_dtype), ConfigError,
                 "hybrid sharding: zero.reduce_dtype {} cannot be summed across shard groups by the {} communicator",
                 dtype_name(cfg_.reduce_dtype), replicas_->backend_name());
    data_rank_ = replicas_->rank() * world_ + rank_;
    data_world_ = replicas_->world() * world_;
  }
  check_fixed_point_terms(cfg_.accum_steps);
  part_ = make_partition(groups_, world_, cfg_.bucket_elements);
  plan_ = plan_buffers(cfg_, part_, replicated() ? replicas_->world() : 1);
  const size_t G = groups_.size();

  params_ = Buffer(alloc_, plan_.params, cfg_.param_dtype, MemCategory::Params);
  accum_ = Buffer(alloc_, plan_.accum, cfg_.accum_dtype, MemCategory::Grads);
  TrackingAllocator* optim_alloc = &alloc_;
  if (cfg_.offload_optimizer) {
    host_ops_ = make_cpu_ops();
    // The CPU backend's memory is host memory already: its one allocator keeps the one account. A device's:
    // the arrays in plain host memory, the transfer staging in the memory its copies are fastest from.
    TrackingAllocator* staging_alloc = &alloc_;
    if (!ops_.host_addressable()) {
      host_alloc_ = std::make_unique<TrackingAllocator>(make_host_allocator());
      host_staging_alloc_ = std::make_unique<TrackingAllocator>(ops_.make_staging_allocator());
      optim_alloc = host_alloc_.get();
      staging_alloc = host_staging_alloc_.get();
    }
    for (int s = 0; s < DeviceOps::kTransferSlots; ++s) {
      host_grad_[s] = Buffer(*staging_alloc, plan_.offload_chunk, cfg_.accum_dtype, MemCategory::Other);
      host_params_[s] = Buffer(*staging_alloc, plan_.offload_chunk, cfg_.param_dtype, MemCategory::Other);
    }
  }
  // A split master's buffer holds the low halves: 16-bit patterns, stored as bf16 only for their size.
  master_ = Buffer(*optim_alloc, plan_.master_in_params ? 0 : plan_.optimizer, cfg_.split_master ? DType::BF16 : DType::F32,
                   MemCategory::Master);
  m_ = Buffer(*optim_alloc, plan_.optimizer, DType::F32, MemCategory::OptimM);
  v_ = Buffer(*optim_alloc, plan_.optimizer, DType::F32, MemCategory::OptimV);
  chunk_shard_ = plan_.chunk;
  for (int s = 0; s < 2; ++s) staging_[s] = Buffer(alloc_, plan_.staging, cfg_.param_dtype, MemCategory::CommBuffers);
  for (int s = 0; s < kReductionsInFlight && plan_.reduction_buffers; ++s) {
    send_[s] = Buffer(alloc_, chunk_shard_ * world_, cfg_.reduce_dtype, MemCategory::CommBuffers);
    recv_[s] = Buffer(alloc_, chunk_shard_, cfg_.reduce_dtype, MemCategory::CommBuffers);
  }
  for (int s = 0; s < kReductionsInFlight && plan_.replica_chunk > 0; ++s)
    replica_send_[s] = Buffer(alloc_, plan_.replica_chunk, cfg_.reduce_dtype, MemCategory::CommBuffers);
  for (size_t s = 0; s < plan_.ring_slots; ++s)
    ring_.push_back(Buffer(alloc_, plan_.ring_slot, cfg_.param_dtype, MemCategory::Gathered));
  ring_unit_.assign(ring_.size(), -1);
  ring_handle_.resize(ring_.size());
  partials_ = Buffer(alloc_, plan_.partials, DType::F64, MemCategory::Other);
  ops_.zero(partials_.data(), DType::F64, partials_.count());
  for (size_t g = 0; g < G; ++g) {
    tensor_base_.push_back(g == 0 ? 1 : tensor_base_[g - 1] + groups_[g - 1].tensors.size());
    unit_base_.push_back(int(unit_piece_.size()));
    for (int k = 0; k < part_.groups[g].pieces; ++k) unit_piece_.push_back({int(g), k});
  }
  // Zeroed once: padding stays zero, and stages 0-2 never write the parameters' padding either.
  ops_.zero(params_.data(), cfg_.param_dtype, params_.count());
  ops_.zero(accum_.data(), cfg_.accum_dtype, accum_.count());
  for (Buffer* b : {&master_, &m_, &v_}) optim_ops().zero(b->data(), b->dtype(), b->count());

  offset_in_bucket_.assign(G, 0);
  bucket_units_.assign(part_.buckets.size(), 0);
  for (size_t b = 0; b < part_.buckets.size(); ++b) {
    size_t off = 0;
    for (int g : part_.buckets[b].groups) {
      offset_in_bucket_[g] = off;
      off += part_.groups[g].padded;
      bucket_units_[b] += part_.groups[g].pieces;
    }
  }
  unit_slot_.assign(unit_piece_.size(), -1);
  param_views_.resize(G);
  grad_views_.resize(G);
  piece_views_.resize(unit_piece_.size());
  grad_piece_views_.resize(unit_piece_.size());
  bucket_ready_.assign(part_.buckets.size(), 0);
  unit_ready_.assign(unit_piece_.size(), 0);
  if (!sharded_params()) {
    for (size_t g = 0; g < G; ++g) {
      if (part_.groups[g].split()) continue;
      param_views_[g] = make_view(at(params_, part_.groups[g].full_offset), cfg_.param_dtype, int(g));
    }
  }
}

Engine::~Engine() {
  // Unfinished collectives must complete before their buffers go away.
  for (auto& p : pending_) p.handle.reset();
  for (auto& h : ring_handle_) h.reset();
}

GroupView Engine::make_view(void* base, DType t, int g) const {
  GroupView v;
  const auto& L = part_.groups[g];
  for (size_t i = 0; i < groups_[g].tensors.size(); ++i)
    v.push_back({static_cast<char*>(base) + L.tensor_offsets[i] * dtype_size(t), t, groups_[g].tensors[i].numel});
  return v;
}

// Piece k's runs: rank r's slice [r*shard + k*c, + len) of the flat space, clipped to the group's numel.
// base holds the piece rank-major (r*len + i) when rank_major, else it is the group's full region.
PieceView Engine::make_piece_view(int g, int k, void* base, bool rank_major) const {
  const auto& L = part_.groups[g];
  const size_t c0 = L.piece_begin(k), len = L.piece_len(k), esz = dtype_size(cfg_.param_dtype);
  PieceView v;
  v.dtype = cfg_.param_dtype;
  for (size_t r = 0; r < size_t(world_); ++r) {
    const size_t begin = r * L.shard + c0;
    if (begin >= L.numel) break;
    const size_t count = std::min(len, L.numel - begin);
    const size_t at_elem = rank_major ? r * len : begin;
    v.runs.push_back({begin, count, static_cast<char*>(base) + at_elem * esz});
  }
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
  set_tensor_range(g, t, 0, groups_[g].tensors[t].numel, full);
}

void Engine::set_tensor_range(int g, int t, size_t first, size_t count, const float* src) {
  check_group(g, "set_tensor_range");
  ZERO_CHECK(t >= 0 && size_t(t) < groups_[g].tensors.size() && first + count <= groups_[g].tensors[t].numel,
             "set_tensor_range: tensor {} elements [{}, {}) out of range in group '{}'", t, first, first + count,
             groups_[g].name);
  const auto& L = part_.groups[g];
  // [t0, t1): the range in the group's flat space; `src` holds exactly it.
  const size_t t0 = L.tensor_offsets[t] + first, t1 = t0 + count;
  // The optimizer's range of this group, and (stage 3) the compute-parameter shard, intersected with the range.
  const OptimizerShard s = optimizer_shard(g);
  size_t lo = std::max(t0, s.begin), hi = std::min(t1, s.begin + s.count);
  if (cfg_.split_master) {
    // The params round as the master's high halves (not to even), replicas included, so every rank's
    // copy of a slice equals its owner's; the owner's range then gets both halves (its params again).
    if (!sharded_params()) split_from_host(at(params_, L.full_offset + t0), nullptr, src, t1 - t0);
    if (lo < hi)
      split_from_host(static_cast<char*>(s.master_high) + (lo - s.begin) * 2, s.master_low + (lo - s.begin),
                      src + (lo - t0), hi - lo);
    return;
  }
  if (lo < hi) optim_ops().copy_from_host(s.master + (lo - s.begin), DType::F32, src + (lo - t0), hi - lo);
  if (sharded_params()) {
    const size_t p0 = size_t(rank_) * L.shard;
    lo = std::max(t0, p0), hi = std::min(t1, p0 + L.shard);
    if (lo < hi) ops_.copy_from_host(at(params_, L.shard_offset + (lo - p0)), cfg_.param_dtype, src + (lo - t0), hi - lo);
  } else {
    ops_.copy_from_host(at(params_, L.full_offset + t0), cfg_.param_dtype, src, t1 - t0);
  }
}

ElementRange Engine::kept_tensor_range(int g, int t) const {
  check_group(g, "kept_tensor_range");
  ZERO_CHECK(t >= 0 && size_t(t) < groups_[g].tensors.size(), "kept_tensor_range: no tensor {} in group '{}'", t,
             groups_[g].name);
  const size_t numel = groups_[g].tensors[t].numel;
  if (!sharded_params()) return {0, numel};
  // What set_tensor_range writes at stage 3: the optimizer's range and the param shard, each met with the
  // tensor's flat range [t0, t0 + numel); their hull, relative to the tensor.
  const auto& L = part_.groups[g];
  const size_t t0 = L.tensor_offsets[t], t1 = t0 + numel;
  const OptimizerShard s = optimizer_shard(g);
  const size_t p0 = size_t(rank_) * L.shard;
  const size_t lo = std::max(t0, std::min(s.begin, p0)), hi = std::min(t1, std::max(s.begin + s.count, p0 + L.shard));
  return lo < hi ? ElementRange{lo - t0, hi - lo} : ElementRange{0, 0};
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
  if (cfg_.split_master) {
    s.master_high = own_params(g);
    s.master_low = master_.as<uint16_t>() + off;
  } else if (plan_.master_in_params) {
    s.master = static_cast<float*>(own_params(g));
  } else {
    s.master = master_.as<float>() + off;
  }
  s.m = m_.as<float>() + off;
  s.v = v_.as<float>() + off;
  return s;
}

void* Engine::own_params(int g) const {
  const auto& L = part_.groups[g];
  switch (cfg_.stage) {
    case 0: return at(params_, L.full_offset);
    case 3: return at(params_, L.shard_offset);
    default: return at(params_, L.full_offset + size_t(rank_) * L.shard);  // stages 1-2: its own slice
  }
}

void Engine::split_from_host(void* high, uint16_t* low, const float* src, size_t n) {
  const size_t chunk = std::min(n, transfer_chunk());
  Buffer tmp(alloc_, chunk, DType::F32, MemCategory::Other);
  for (size_t a = 0; a < n; a += chunk) {
    const size_t k = std::min(chunk, n - a);
    ops_.copy_from_host(tmp.data(), DType::F32, src + a, k);
    ops_.split_master(static_cast<char*>(high) + a * 2, low ? low + a : nullptr, tmp.as<float>(), k);
  }
}

void Engine::join_to_host(float* dst, const void* high, const uint16_t* low, size_t n) const {
  const size_t chunk = std::min(n, transfer_chunk());
  Buffer tmp(alloc_, chunk, DType::F32, MemCategory::Other);
  for (size_t a = 0; a < n; a += chunk) {
    const size_t k = std::min(chunk, n - a);
    ops_.join_master(tmp.as<float>(), static_cast<const char*>(high) + a * 2, low + a, k);
    ops_.copy_to_host(dst + a, tmp.data(), DType::F32, k);
  }
}

// ---- micro-step protocol -------------------------------------------------------------------------

void Engine::begin_micro_step() {
  if (micro_ >= 0) require_all_ready("begin_micro_step");
  ZERO_REQUIRE(micro_ + 1 < cfg_.accum_steps, ConfigError,
               "begin_micro_step called {} times without step(); accumulation is {}", micro_ + 2, cfg_.accum_steps);
  ++micro_;
  std::fill(bucket_ready_.begin(), bucket_ready_.end(), 0);
  std::fill(unit_ready_.begin(), unit_ready_.end(), 0);
  begin_forward();
}

void Engine::begin_forward() {
  backward_ = false;
  free_all_units();  // unused prefetches
}

void Engine::begin_backward() { backward_ = true; }

// ---- stage-3 gathers into the ring -----------------------------------------------------------------

void Engine::start_gather(int u) {
  int slot = -1;
  for (size_t s = 0; s < ring_.size() && slot < 0; ++s)
    if (ring_unit_[s] < 0) slot = int(s);
  const auto [g, k] = unit_piece_[u];
  if (slot < 0) {
    std::vector<std::string> held;
    for (int v : ring_unit_) held.push_back(fmt::format("'{}'", groups_[unit_piece_[v].first].name));
    throw ConfigError(fmt::format("stage 3: gathering group '{}' would hold more than prefetch_depth + 1 = {} groups "
                                  "at once (held: {}; release each group after use)",
                                  groups_[g].name, ring_.size(), fmt::join(held, ", ")));
  }
  const auto& L = part_.groups[g];
  ring_unit_[slot] = u;
  unit_slot_[u] = slot;
  const size_t len = L.piece_len(k), own = L.shard_offset + L.piece_begin(k);  // (a lambda names no binding: clang 14)
  ring_handle_[slot] = start_timed([&] {
    return comm_.all_gather_async(at(params_, own), ring_[slot].data(), len, cfg_.param_dtype,
                                  backward_ ? "ag bwd" : "ag fwd");
  });
}

void* Engine::gather_unit(int u) {
  if (unit_slot_[u] < 0) start_gather(u);
  const int slot = unit_slot_[u];
  if (ring_handle_[slot]) {
    const StepClock::Scope timed(clock_, TimeCategory::Comm);
    ring_handle_[slot]->enqueue_wait();
    ring_handle_[slot].reset();
  }
  return ring_[slot].data();
}

// Prefetch the units after (g, k) in the current direction while ring slots are free. Backward skips
// split groups: their gradient needs no parameters, so the model does not gather them there.
void Engine::prefetch_after(int g, int k) {
  const int dir = backward_ ? -1 : 1;
  int u = unit_of(g, k);
  for (int i = 0; i < cfg_.prefetch_depth; ++i) {
    u += dir;
    if (u < 0 || size_t(u) >= unit_piece_.size()) return;
    if (backward_ && part_.groups[unit_piece_[u].first].split()) return;
    if (unit_slot_[u] >= 0) continue;
    if (std::find(ring_unit_.begin(), ring_unit_.end(), -1) == ring_unit_.end()) return;
    start_gather(u);
  }
}

void Engine::free_unit(int u) {
  const int slot = unit_slot_[u];
  if (slot < 0) return;
  if (ring_handle_[slot]) {  // an unused prefetch: its all-gather must finish before the slot is reused
    const StepClock::Scope timed(clock_, TimeCategory::Comm);
    ring_handle_[slot]->enqueue_wait();
    ring_handle_[slot].reset();
  }
  ring_unit_[slot] = -1;
  unit_slot_[u] = -1;
}

void Engine::free_all_units() {
  for (size_t u = 0; u < unit_slot_.size(); ++u) free_unit(int(u));
}

const GroupView& Engine::gather(int g) {
  check_group(g, "gather");
  ZERO_REQUIRE(!part_.groups[g].split(), ConfigError, "gather({}): group '{}' is split into {} pieces; use gather_piece",
               g, groups_[g].name, part_.groups[g].pieces);
  if (!sharded_params()) return param_views_[g];
  if (gathers_in_place(part_)) {
    param_views_[g] = make_view(at(params_, part_.groups[g].shard_offset), cfg_.param_dtype, g);
    return param_views_[g];
  }
  param_views_[g] = make_view(gather_unit(unit_of(g, 0)), cfg_.param_dtype, g);
  prefetch_after(g, 0);
  return param_views_[g];
}

void Engine::release(int g) {
  check_group(g, "release");
  if (sharded_params()) free_unit(unit_of(g, 0));
}

const PieceView& Engine::gather_piece(int g, int k) {
  check_group(g, "gather_piece");
  ZERO_CHECK(k >= 0 && k < part_.groups[g].pieces, "gather_piece: piece {} of group '{}' out of range [0, {})", k,
             groups_[g].name, part_.groups[g].pieces);
  const int u = unit_of(g, k);
  if (!sharded_params()) {
    piece_views_[u] = make_piece_view(g, k, at(params_, part_.groups[g].full_offset), false);
  } else if (gathers_in_place(part_)) {
    const GroupLayout& L = part_.groups[g];
    piece_views_[u] = make_piece_view(g, k, at(params_, L.shard_offset + L.piece_begin(k)), true);
  } else {
    piece_views_[u] = make_piece_view(g, k, gather_unit(u), true);
    prefetch_after(g, k);
  }
  return piece_views_[u];
}

void Engine::release_piece(int g, int k) {
  check_group(g, "release_piece");
  if (sharded_params()) free_unit(unit_of(g, k));
}

// ---- gradients -------------------------------------------------------------------------------------

int Engine::acquire_slot(int bucket, int piece) {
  const int slot = slot_of(bucket, piece);
  if (slot_bucket_[slot] == bucket && slot_piece_[slot] == piece && slot_state_[slot] == SlotState::Filling) return slot;
  ZERO_CHECK(slot_state_[slot] == SlotState::Free, "bucket slot {} still filling bucket {} when bucket {} needs it",
             slot, slot_bucket_[slot], bucket);
  slot_state_[slot] = SlotState::Filling;
  slot_bucket_[slot] = bucket;
  slot_piece_[slot] = piece;
  return slot;
}

const GroupView& Engine::grad_view(int g) {
  check_group(g, "grad_view");
  const StepClock::Scope timed(clock_, TimeCategory::GradBuckets);
  const auto& L = part_.groups[g];
  ZERO_REQUIRE(!L.split(), ConfigError, "grad_view({}): group '{}' is split into {} pieces; use grad_piece", g,
               groups_[g].name, L.pieces);
  const int slot = acquire_slot(L.bucket, 0);
  void* base = at(staging_[slot], offset_in_bucket_[g]);
  // The model writes the real elements only; padding must reduce as zero.
  ops_.zero(static_cast<char*>(base) + L.numel * dtype_size(cfg_.param_dtype), cfg_.param_dtype, L.padded - L.numel);
  grad_views_[g] = make_view(base, cfg_.param_dtype, g);
  return grad_views_[g];
}

const PieceView& Engine::grad_piece(int g, int k) {
  check_group(g, "grad_piece");
  const StepClock::Scope timed(clock_, TimeCategory::GradBuckets);
  const auto& L = part_.groups[g];
  ZERO_CHECK(k >= 0 && k < L.pieces, "grad_piece: piece {} of group '{}' out of range [0, {})", k, groups_[g].name,
             L.pieces);
  void* base = staging_[acquire_slot(L.bucket, k)].data();
  const int u = unit_of(g, k);
  grad_piece_views_[u] = make_piece_view(g, k, base, true);
  // Rank-major in the slot, rank r's run at r*len. The model overwrites the runs; only what lies past
  // the group's numel (padding, not handed out) must be zeroed so it reduces as zero.
  const size_t len = L.piece_len(k), esz = dtype_size(cfg_.param_dtype), runs = grad_piece_views_[u].runs.size();
  const size_t covered = runs == 0 ? 0 : (runs - 1) * len + grad_piece_views_[u].runs.back().count;
  ops_.zero(static_cast<char*>(base) + covered * esz, cfg_.param_dtype, len * size_t(world_) - covered);
  return grad_piece_views_[u];
}

// Adds the non-finite count of n gradient values at flat offset flat_begin of group g to its tensors' counters in
// backend memory (read once, at the step). Under fixed-point sums a term past their limit counts as well
// (math::kFixedTermLimit). One call for the view: each tensor is a run counted into its own partial (tensors lie
// back to back in a group: partition.h), so a bad value still names its tensor while a GPU takes the whole view in
// two launches. An empty tensor between two others is an empty run; padding past the last tensor is not counted.
void Engine::count_nonfinite(int g, size_t flat_begin, const void* data, size_t n) {
  const float limit = fixed_point_sums(cfg_) ? math::kFixedTermLimit : std::numeric_limits<float>::infinity();
  size_t first = 0;  // the first tensor in the view: run r counts into tensor first + r
  count_ends_.clear();
  for_each_tensor_in(g, flat_begin, flat_begin + n, [&](size_t t, size_t, size_t hi) {
    if (count_ends_.empty()) first = t;
    while (first + count_ends_.size() < t) count_ends_.push_back(count_ends_.back());
    count_ends_.push_back(hi - flat_begin);
  });
  ops_.accumulate_nonfinite_runs(data, cfg_.param_dtype, count_ends_.data(), count_ends_.size(),
                                 partials_.as<double>() + tensor_base_[g] + first, limit);
}

void Engine::check_fixed_point_terms(int accum_steps) const {
  if (!fixed_point_sums(cfg_)) return;
  ZERO_REQUIRE(int64_t(accum_steps) * data_world_ <= math::kFixedMaxTerms, ConfigError,
               "fixed-point gradient sums take at most {} micro-batches a step (accumulation {} x {} ranks): "
               "use larger micro-batches",
               math::kFixedMaxTerms, accum_steps, data_world_);
}

void Engine::grad_ready(int g) {
  check_group(g, "grad_ready");
  const StepClock::Scope timed(clock_, TimeCategory::GradBuckets);
  // The view is spent once handed in: a later grad_ready needs a fresh grad_view (its own gradient).
  ZERO_REQUIRE(!grad_views_[g].empty(), ConfigError, "grad_ready({}) without grad_view({}) (group '{}')", g, g,
               groups_[g].name);
  const int u = unit_of(g, 0);
  require_not_handed_in(u, /*piece=*/false);
  if (cfg_.nan_guard) {
    const StepClock::Scope counting(clock_, TimeCategory::GradBuckets, "finite_count",
                                    {double(part_.groups[g].numel) * traffic::finite_count(cfg_.param_dtype)});
    count_nonfinite(g, 0, grad_views_[g].front().data, part_.groups[g].numel);
  }
  grad_views_[g].clear();
  unit_ready(u);
}

void Engine::piece_ready(int g, int k) {
  check_group(g, "piece_ready");
  const StepClock::Scope timed(clock_, TimeCategory::GradBuckets);
  const int u = unit_of(g, k);
  ZERO_REQUIRE(!grad_piece_views_[u].runs.empty(), ConfigError, "piece_ready({}, {}) without grad_piece({}, {})", g,
               k, g, k);
  require_not_handed_in(u, /*piece=*/true);
  if (cfg_.nan_guard) {
    size_t n = 0;
    for (const FlatRun& r : grad_piece_views_[u].runs) n += r.count;
    const StepClock::Scope counting(clock_, TimeCategory::GradBuckets, "finite_count",
                                    {double(n) * traffic::finite_count(cfg_.param_dtype)});
    for (const FlatRun& r : grad_piece_views_[u].runs) count_nonfinite(g, r.begin, r.data, r.count);
  }
  launch_piece(g, k, slot_of(part_.groups[g].bucket, k));
  grad_piece_views_[u].runs.clear();
  unit_ready(u);
}

// Before anything is counted or launched, so a second hand-in changes nothing.
void Engine::require_not_handed_in(int u, bool piece) const {
  if (!unit_ready_[u]) return;
  const auto [g, k] = unit_piece_[u];
  if (piece)
    throw ConfigError(fmt::format("piece_ready({}, {}): piece {} of group '{}' was handed in already this micro-step",
                                  g, k, k, groups_[g].name));
  throw ConfigError(fmt::format("grad_ready({}): group '{}' was handed in already this micro-step", g, groups_[g].name));
}

void Engine::unit_ready(int u) {
  const int g = unit_piece_[u].first, b = part_.groups[g].bucket;
  unit_ready_[u] = 1;
  if (++bucket_ready_[b] == bucket_units_[b]) launch_bucket(b);
  // Drive progress of collectives already in flight (MPI progresses only inside MPI calls).
  for (auto& p : pending_) p.handle->test();
}

void Engine::require_all_ready(const char* where) const {
  for (size_t u = 0; u < unit_ready_.size(); ++u) {
    if (unit_ready_[u]) continue;
    const auto [g, k] = unit_piece_[u];
    if (part_.groups[g].split())
      throw ConfigError(fmt::format("{}(): micro-step {}: the gradient of piece {} of group '{}' did not arrive "
                                    "(grad_piece({}, {}) + piece_ready({}, {}))", where, micro_, k, groups_[g].name, g,
                                    k, g, k));
    throw ConfigError(fmt::format("{}(): micro-step {}: the gradient of group '{}' did not arrive (grad_view({}) + "
                                  "grad_ready({}))", where, micro_, groups_[g].name, g, g));
  }
}

void Engine::empty_micro_step() {
  const StepClock::Scope timed(clock_, TimeCategory::GradBuckets);  // zero gradients (its waits: comm)
  const int G = int(groups_.size());
  for (int g = 0; g < G; ++g) {
    if (!part_.groups[g].split()) {
      gather(g);
      release(g);
      continue;
    }
    for (int k = 0; k < num_pieces(g); ++k) {
      gather_piece(g, k);
      release_piece(g, k);
    }
  }
  begin_backward();
  for (int g = G - 1; g >= 0; --g) {
    if (part_.groups[g].split()) {
      for (int k = 0; k < num_pieces(g); ++k) {
        grad_piece(g, k);
        piece_ready(g, k);
      }
      continue;
    }
    gather(g);
    for (const TensorView& t : grad_view(g)) ops_.zero(t.data, t.dtype, t.numel);
    grad_ready(g);
    release(g);
  }
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
  const StepClock::Scope packing(clock_, TimeCategory::GradBuckets, "pack",
                                 {double(n * size_t(world_)) * traffic::pack(src_t, cfg_.reduce_dtype)});
  for (size_t r = 0; r < size_t(world_); ++r)
    for_each_piece(B, a, n, [&](int g, size_t in_shard, size_t in_chunk, size_t len) {
      const char* from = static_cast<const char*>(src(g)) + (r * part_.groups[g].shard + in_shard) * esz;
      ops_.copy(static_cast<char*>(send) + (r * n + in_chunk) * rsz, cfg_.reduce_dtype, from, src_t, len);
    });
}

int Engine::acquire_busy_slot(int first, int& next) {
  const int c = next;
  next = (next + 1) % kReductionsInFlight;
  while (chunk_busy_[first + c]) complete_oldest();
  chunk_busy_[first + c] = true;
  return c;
}

void Engine::push_pending(int chunk_slot, CommHandle h, std::function<void()> on_done) {
  pending_.push_back({chunk_slot, std::move(h), std::move(on_done)});
}

void Engine::launch_bucket(int b) {
  const Bucket& B = part_.buckets[b];
  const int slot = slot_of(b, 0);
  const DType pt = cfg_.param_dtype, at_ = cfg_.accum_dtype, rt = cfg_.reduce_dtype;
  // A split group is a bucket of its own whose pieces were folded in (stages 0-1) or put on the wire
  // (stages 2-3) one by one as they came.
  const bool split = part_.groups[B.first_group()].split();

  // Stages 0-1, and any stage on one rank with the reductions in place (reductions_in_place: there a shard is its
  // whole group, shard_offset = full_offset): fold the views into the accumulator now.
  if (!sharded_grads() || !plan_.reduction_buffers) {
    if (!split) {
      for (int g : B.groups) {
        const auto& L = part_.groups[g];
        const StepClock::Scope folding(clock_, TimeCategory::GradBuckets, "accumulate",
                                       {double(L.padded) * traffic::accumulate(pt, at_, first_micro())});
        fold(first_micro(), at(accum_, L.full_offset), at(staging_[slot], offset_in_bucket_[g]), pt, L.padded);
      }
      slot_state_[slot] = SlotState::Free;  // the views are folded into the accumulator already
    }
    if (!last_micro()) return;  // nothing to reduce before the accumulation boundary
    const size_t first = part_.groups[B.first_group()].full_offset;
    if (!plan_.reduction_buffers) {  // one rank: the accumulator is the group's sum (reductions_in_place)
      reduce_across_replicas(first, B.padded);
      return;
    }
    if (cfg_.stage == 0 && at_ == rt) {  // all-reduce the accumulator in place, chunk by chunk
      // Chunks of at most a bucket (a split group's bucket is the whole group: the embedding's 155 MB in one
      // MPI_Iallreduce ran at ~0.3 GB/s on shared memory against ~6 GB/s for messages of a few MB), at most
      // kReductionsInFlight on the wire through the chunk slots (their buffers unused here), as on the other
      // paths: between two MPI ranks, 4M-float chunks moved 0.45-0.55 G elements/s with a whole 88M-float
      // accumulator in flight at once (erratically), 0.96 two at a time, 0.46 four at a time. On a device the
      // wait for a slot is only ordered on the stream.
      const size_t cap = chunk_shard_ * size_t(world_);
      for (size_t a = 0; a < B.padded; a += cap) {
        const size_t n = std::min(cap, B.padded - a);
        const int c = acquire_chunk_slot();
        push_pending(c, start_timed([&] { return comm_.all_reduce_async(at(accum_, first + a), n, rt, ReduceOp::Sum, "ar"); }),
                     [this, first, a, n] { reduce_across_replicas(first + a, n); });
      }
      return;
    }
    if (cfg_.stage == 0) {  // through the send buffer in the reduction dtype, chunk by chunk
      const size_t cap = chunk_shard_ * size_t(world_);
      for (size_t a = 0; a < B.padded; a += cap) {
        const size_t n = std::min(cap, B.padded - a);
        const int c = acquire_chunk_slot();
        {
          const StepClock::Scope packing(clock_, TimeCategory::GradBuckets, "pack", {double(n) * traffic::pack(at_, rt)});
          ops_.copy(send_[c].data(), rt, at(accum_, first + a), at_, n);
        }
        push_pending(c, start_timed([&] { return comm_.all_reduce_async(send_[c].data(), n, rt, ReduceOp::Sum, "ar"); }),
                     [this, c, first, a, n] {
          ops_.copy(at(accum_, first + a), cfg_.accum_dtype, send_[c].data(), cfg_.reduce_dtype, n);
          reduce_across_replicas(first + a, n);
        });
      }
      return;
    }
    // Stage 1: reduce-scatter the full accumulator; each rank's result lands in its own slices.
    for (size_t a = 0; a < B.shard; a += chunk_shard_) {
      const size_t n = std::min(chunk_shard_, B.shard - a);
      const int c = acquire_chunk_slot();
      pack_chunk(B, a, n, [&](int g) { return at(accum_, part_.groups[g].full_offset); }, at_, send_[c].data());
      push_pending(c, start_timed([&] { return comm_.reduce_scatter_async(send_[c].data(), recv_[c].data(), n, rt, ReduceOp::Sum, "rs"); }),
                   [this, b, c, a, n] {
                     for_each_piece(part_.buckets[b], a, n, [&](int g, size_t in_shard, size_t in_chunk, size_t len) {
                       const auto& L = part_.groups[g];
                       const size_t own = L.full_offset + size_t(rank_) * L.shard + in_shard;
                       ops_.copy(at(accum_, own), cfg_.accum_dtype, at(recv_[c], in_chunk), cfg_.reduce_dtype, len);
                       reduce_across_replicas(own, len);
                     });
                   });
    }
    return;
  }
  if (split) return;
  // Stages 2-3: reduce-scatter this micro-step's bucket, chunk by chunk, into the shard accumulator.
  // The bucket's groups are consecutive, so its shard space is one contiguous run of the accumulator.
  // Hybrid sharding: at the last micro-step each chunk, once summed in, goes across the replicas.
  const size_t dst = part_.groups[B.first_group()].shard_offset;
  const bool first = first_micro(), last = last_micro();
  for (size_t a = 0; a < B.shard; a += chunk_shard_) {
    const size_t n = std::min(chunk_shard_, B.shard - a);
    const int c = acquire_chunk_slot();
    pack_chunk(B, a, n, [&](int g) { return at(staging_[slot], offset_in_bucket_[g]); }, pt, send_[c].data());
    push_pending(c, start_timed([&] { return comm_.reduce_scatter_async(send_[c].data(), recv_[c].data(), n, rt, ReduceOp::Sum, "rs"); }),
                 [this, c, dst, a, n, first, last] {
                   fold(first, at(accum_, dst + a), at(recv_[c], 0), cfg_.reduce_dtype, n);
                   if (last) reduce_across_replicas(dst + a, n);
                 });
  }
  // Every chunk is packed (copied out, in queue order on a device): the slot can be refilled.
  slot_state_[slot] = SlotState::Free;
}

void Engine::launch_piece(int g, int k, int slot) {
  const auto& L = part_.groups[g];
  const size_t c0 = L.piece_begin(k), len = L.piece_len(k), W = size_t(world_);
  // Fold into the full accumulator now; the bucket reduces at the boundary (stages 0-1), or nothing does (one
  // rank with the reductions in place, any stage: W = 1, the piece is its own shard).
  if (!sharded_grads() || !plan_.reduction_buffers) {
    const StepClock::Scope folding(clock_, TimeCategory::GradBuckets, "accumulate",
                                   {double(W * len) * traffic::accumulate(cfg_.param_dtype, cfg_.accum_dtype,
                                                                          first_micro())});
    for (size_t r = 0; r < W; ++r)
      fold(first_micro(), at(accum_, L.full_offset + r * L.shard + c0), at(staging_[slot], r * len),
           cfg_.param_dtype, len);
    slot_state_[slot] = SlotState::Free;
    return;
  }
  // The slot holds the piece rank-major: exactly one reduce-scatter chunk of the group's shard space.
  const int c = acquire_chunk_slot();
  ZERO_CHECK(len * W <= send_[c].count(), "piece {} of group '{}' ({} elements) outruns the send buffer ({})", k,
             groups_[g].name, len * W, send_[c].count());
  {
    const StepClock::Scope packing(clock_, TimeCategory::GradBuckets, "pack",
                                   {double(len * W) * traffic::pack(cfg_.param_dtype, cfg_.reduce_dtype)});
    ops_.copy(send_[c].data(), cfg_.reduce_dtype, staging_[slot].data(), cfg_.param_dtype, len * W);
  }
  slot_state_[slot] = SlotState::Free;
  const size_t dst = L.shard_offset + c0;
  const bool first = first_micro(), last = last_micro();  // hybrid sharding: last, as in launch_bucket
  push_pending(c, start_timed([&] {
                 return comm_.reduce_scatter_async(send_[c].data(), recv_[c].data(), len, cfg_.reduce_dtype, ReduceOp::Sum, "rs");
               }),
               [this, c, dst, len, first, last] {
                 fold(first, at(accum_, dst), at(recv_[c], 0), cfg_.reduce_dtype, len);
                 if (last) reduce_across_replicas(dst, len);
               });
}

void Engine::complete_oldest() {
  ZERO_CHECK(!pending_.empty(), "no collective in flight");
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  {
    const StepClock::Scope timed(clock_, TimeCategory::Comm);
    p.handle->enqueue_wait();  // on_done's backend work is ordered after it; the host need not wait
  }
  if (p.on_done) {  // the reduced chunk into the accumulator (and across replicas): gradient work wherever it runs
    const StepClock::Scope folding(clock_, TimeCategory::GradBuckets, "reduced_fold");
    p.on_done();
  }
  if (p.chunk_slot >= 0) chunk_busy_[p.chunk_slot] = false;
}

void Engine::complete_all() {
  while (!pending_.empty()) complete_oldest();  // including what their on_done starts across replicas
}

void Engine::reduce_across_replicas(size_t offset, size_t n) {
  if (!replicated()) return;
  if (plan_.replica_chunk == 0) {  // the accumulator's dtype is the reduce dtype: in place
    const size_t cap = transfer_chunk();
    for (size_t a = 0; a < n; a += cap) {
      const size_t k = std::min(cap, n - a);
      push_pending(-1, start_timed([&] {
                     return replicas_->all_reduce_async(at(accum_, offset + a), k, cfg_.accum_dtype, ReduceOp::Sum,
                                                        "ar replicas");
                   }),
                   nullptr);
    }
    return;
  }
  // Through a replica chunk in the reduce dtype, as the group's own reductions travel: rounded going out (a
  // chunk waits for its slot's last all-reduce to be done), widened back into the accumulator when done.
  const DType rt = cfg_.reduce_dtype;
  for (size_t a = 0; a < n; a += plan_.replica_chunk) {
    const size_t k = std::min(plan_.replica_chunk, n - a);
    const int c = acquire_replica_slot();
    ops_.copy(replica_send_[c].data(), rt, at(accum_, offset + a), cfg_.accum_dtype, k);
    push_pending(kReductionsInFlight + c, start_timed([&] {
                   return replicas_->all_reduce_async(replica_send_[c].data(), k, rt, ReduceOp::Sum, "ar replicas");
                 }),
                 [this, c, offset, a, k] {
                   ops_.copy(at(accum_, offset + a), cfg_.accum_dtype, replica_send_[c].data(), cfg_.reduce_dtype, k);
                 });
  }
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

void Engine::fold(bool first, void* acc, const void* src, DType src_t, size_t n) {
  if (first)
    ops_.copy(acc, cfg_.accum_dtype, src, src_t, n);
  else
    ops_.add(acc, cfg_.accum_dtype, src, src_t, n);
}

StepResult Engine::step(double loss_divisor) {
  const StepClock::Scope timed(clock_, TimeCategory::Optimizer);
  ZERO_REQUIRE(loss_divisor > 0, ConfigError, "step: loss divisor must be positive (got {})", loss_divisor);
  ZERO_REQUIRE(micro_ == cfg_.accum_steps - 1, ConfigError, "step() after {} micro-steps; accumulation is {}",
               micro_ + 1, cfg_.accum_steps);
  require_all_ready("step");
  {
    const StepClock::Scope completing(clock_, TimeCategory::Optimizer, "reductions_complete");  // waits: comm
    complete_all();
  }
  free_all_units();
  micro_ = -1;

  // Norm of what this rank owns (stage 0 owns everything, identical on every rank) into the partials
  // that already hold the non-finite counts; one read back, then one scalar reduction for both.
  // Fixed-point sums: the exact sum of squares, after the counts (buffer_plan.h).
  double* sq_dev = partials_.as<double>();
  const bool fixed = fixed_point_sums(cfg_);
  auto* fixed_sq_dev = fixed ? reinterpret_cast<math::FixedSquareSum*>(sq_dev + partials_.count() - kFixedSquareWords)
                             : nullptr;
  if (cfg_.stage != 0 || rank_ == 0)
    for (size_t g = 0; g < groups_.size(); ++g) {
      const size_t n = optimizer_shard(int(g)).count;
      const StepClock::Scope norming(clock_, TimeCategory::Optimizer, "grad_norm",
                                     {double(n) * traffic::grad_norm(cfg_.accum_dtype)});
      if (fixed)
        ops_.accumulate_fixed_square_sum(static_cast<const int64_t*>(grad_for_optimizer(int(g))), n, fixed_sq_dev);
      else
        ops_.accumulate_sum_squares(grad_for_optimizer(int(g)), cfg_.accum_dtype, n, sq_dev);
    }
  std::vector<double> partials(partials_.count());
  {
    // The host waits here for the device's backward and norm; on a GPU the stream then idles while the host
    // launches AdamW, a gap the step's unnamed optimizer time (its total less its named ops) shows.
    const StepClock::Scope reading(clock_, TimeCategory::Optimizer, "norm_readback");
    ops_.download(partials.data(), partials_.data(), partials_.bytes());
    ops_.zero(partials_.data(), DType::F64, partials_.count());
  }
  // This rank's first tensor with bad values, numbered over all groups' tensors as the partials are (from 1).
  size_t first_bad = 0;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
      const double bad = partials[tensor_base_[g] + t];
      if (bad == 0) continue;
      if (first_bad == 0) first_bad = tensor_base_[g] + t;
      const std::string what =
          fixed ? fmt::format("non-finite or out-of-range (|g| >= {}: fixed-point sums)", math::kFixedTermLimit)
                : "non-finite";
      fprintf(stderr, "zero: rank %d: %.0f %s gradient values in group '%s' tensor '%s'; the step is skipped\n",
              data_rank_, bad, what.c_str(), groups_[g].name.c_str(), groups_[g].tensors[t].name.c_str());
    }
  // One scalar all-reduce: [the bad flag, the sum of squares] (fixed point: its 16-bit limbs, summed
  // exactly in doubles at any rank order).
  constexpr int kLimbs = math::FixedSquareSum::kLimbs;
  double sums[1 + kLimbs] = {first_bad > 0 ? 1.0 : 0.0, partials[0]};
  if (fixed) {
    math::FixedSquareSum sq;
    std::memcpy(sq.w, partials.data() + partials.size() - kFixedSquareWords, sizeof(sq.w));
    sq.to_limbs(sums + 1);
  }
  {
    const StepClock::Scope waiting(clock_, TimeCategory::Comm);
    comm_.all_reduce_scalars(sums, fixed ? 1 + kLimbs : 2, ReduceOp::Sum);
    // Hybrid sharding: the norm is every group's already (their shards hold the same sums); the bad flag
    // was this group's ranks' own, so every group must hear it to skip together.
    if (replicated()) replicas_->all_reduce_scalars(sums, 1, ReduceOp::Sum);
  }
  StepResult r;
  r.grad_norm = std::sqrt(fixed ? math::FixedSquareSum::limbs_to_value(sums + 1) : sums[1]) / loss_divisor;
  const bool any_bad = sums[0] > 0;
  if (any_bad || !std::isfinite(r.grad_norm)) {
    if (any_bad) {  // name the lowest rank that saw it, and its first tensor (an integer below 2^53: exact)
      const int64_t T = int64_t(tensor_base_.back() + groups_.back().tensors.size());  // tensor numbers < T
      double code = first_bad > 0 ? double(data_rank_ * T + int64_t(first_bad)) : std::numeric_limits<double>::max();
      const StepClock::Scope waiting(clock_, TimeCategory::Comm);
      comm_.all_reduce_scalars(&code, 1, ReduceOp::Min);
      if (replicated()) replicas_->all_reduce_scalars(&code, 1, ReduceOp::Min);
      r.bad_rank = int(int64_t(code) / T);
      const size_t k = size_t(int64_t(code) % T);
      const size_t g = size_t(std::upper_bound(tensor_base_.begin(), tensor_base_.end(), k) - tensor_base_.begin()) - 1;
      r.bad_group = groups_[g].name;
      r.bad_tensor = groups_[g].tensors[k - tensor_base_[g]].name;
    } else {
      r.bad_group = "(after reduction)";
    }
    r.applied = false;  // the accumulator is left as it is: the next step's first micro-step overwrites it
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
    if (host_ops_) {
      offload_adamw(int(g), s, r.lr, grad_scale);
      continue;
    }
    const char* grad = static_cast<const char*>(grad_for_optimizer(int(g)));
    const size_t gsz = dtype_size(cfg_.accum_dtype);
    // Each run of this rank's range whose tensors AdamW updates alike, one call; padding is skipped.
    for_each_adamw_run(int(g), s.begin, s.begin + s.count, [&](size_t lo, size_t hi, bool decay) {
      const size_t o = lo - s.begin;
      const StepClock::Scope updating(clock_, TimeCategory::Optimizer, "adamw",
                                      {double(hi - lo) * traffic::adamw(cfg_.accum_dtype)});
      if (cfg_.split_master)
        ops_.adamw_split(static_cast<char*>(s.master_high) + o * 2, s.master_low + o, grad + o * gsz, cfg_.accum_dtype,
                         s.m + o, s.v + o, hi - lo, cfg_.adamw, r.lr, step_, decay, grad_scale);
      else
        ops_.adamw(s.master + o, grad + o * gsz, cfg_.accum_dtype, s.m + o, s.v + o, hi - lo, cfg_.adamw, r.lr, step_,
                   decay, grad_scale);
    });
  }
  sync_params();
  r.applied = true;
  r.step = step_;
  return r;
}

// The shard's gradients come down a chunk at a time, each chunk's download queued before the host steps the
// one before it, so the copy runs while the host threads do AdamW (a chunk of K elements: K a bytes over the
// link against K AdamW updates on the host).
void Engine::offload_adamw(int g, const OptimizerShard& s, float lr, float grad_scale) {
  const char* grad = static_cast<const char*>(grad_for_optimizer(g));
  const size_t gsz = dtype_size(cfg_.accum_dtype), K = host_grad_[0].count();
  constexpr int kSlots = DeviceOps::kTransferSlots;
  auto download = [&](size_t a, int slot) {
    ops_.download_async(slot, host_grad_[slot].data(), grad + a * gsz, std::min(K, s.count - a) * gsz);
  };
  if (s.count > 0) download(0, 0);
  for (size_t a = 0, i = 0; a < s.count; a += K, ++i) {
    const int slot = int(i % kSlots);
    const size_t n = std::min(K, s.count - a);
    if (a + K < s.count) download(a + K, int((i + 1) % kSlots));  // its buffer's last chunk was stepped already
    ops_.wait_transfer(slot);
    const char* staged = static_cast<const char*>(host_grad_[slot].data());
    parallel_parts(n, cfg_.offload_threads, [&](size_t p0, size_t p1) {
      // Each run of this thread's range whose tensors AdamW updates alike, one call; padding is skipped.
      for_each_adamw_run(g, s.begin + a + p0, s.begin + a + p1, [&](size_t lo, size_t hi, bool decay) {
        const size_t o = lo - s.begin, h = lo - s.begin - a;  // offsets in the shard and in the staging
        host_ops_->adamw(s.master + o, staged + h * gsz, cfg_.accum_dtype, s.m + o, s.v + o, hi - lo, cfg_.adamw,
                         lr, step_, decay, grad_scale);
      });
    });
  }
}

// The master cast into a chunk of staging while the chunk before it goes up; a buffer is refilled only once its
// last upload is done.
void Engine::offload_upload_params(const OptimizerShard& s, void* params) {
  const size_t psz = dtype_size(cfg_.param_dtype), K = host_params_[0].count();
  constexpr int kSlots = DeviceOps::kTransferSlots;
  size_t i = 0;
  for (size_t a = 0; a < s.count; a += K, ++i) {
    const int slot = int(i % kSlots);
    const size_t n = std::min(K, s.count - a);
    char* staged = static_cast<char*>(host_params_[slot].data());
    if (i >= size_t(kSlots)) ops_.wait_transfer(slot);
    parallel_parts(n, cfg_.offload_threads, [&](size_t p0, size_t p1) {
      host_ops_->copy(staged + p0 * psz, cfg_.param_dtype, s.master + a + p0, DType::F32, p1 - p0);
    });
    ops_.upload_async(slot, static_cast<char*>(params) + a * psz, staged, n * psz);
  }
  for (size_t k = 0; k < std::min(i, size_t(kSlots)); ++k) ops_.wait_transfer(int(k));  // the staging is free again
}

void Engine::set_accum_steps(int k) {
  ZERO_REQUIRE(k >= 1, ConfigError, "accumulation must be at least 1 micro-step (got {})", k);
  ZERO_REQUIRE(micro_ == -1, ConfigError, "set_accum_steps({}) in the middle of an accumulation window", k);
  check_fixed_point_terms(k);
  cfg_.accum_steps = k;
}

void Engine::sync_params() {
  std::vector<CommHandle> handles;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const OptimizerShard s = optimizer_shard(int(g));
    const auto& L = part_.groups[g];
    void* mine = own_params(int(g));
    // A split master's high halves, or fp32 params' own range, are the params already: nothing to cast.
    if (host_ops_) {
      offload_upload_params(s, mine);
    } else if (casts_params(cfg_)) {
      const StepClock::Scope casting(clock_, TimeCategory::Optimizer, "cast_params",
                                     {double(s.count) * traffic::cast_params(cfg_.param_dtype)});
      ops_.copy(mine, cfg_.param_dtype, s.master, DType::F32, s.count);
    }
    if (cfg_.stage == 1 || cfg_.stage == 2)  // own slice in place: all-gather the group's params
      handles.push_back(start_timed(
          [&] { return comm_.all_gather_async(mine, at(params_, L.full_offset), L.shard, cfg_.param_dtype, "ag"); }));
  }
  if (handles.empty()) return;
  // Whatever reads the parameters next (the next forward, a checkpoint's copy) runs on the compute queue:
  // ordered after the all-gathers there, the host goes on to the next step (MPI: a wait, as before).
  const StepClock::Scope timed(clock_, TimeCategory::Comm);
  for (auto& h : handles) h->enqueue_wait();
}

std::vector<float> Engine::full_optimizer_array(int g, OptimArray which) {
  check_group(g, "full_optimizer_array");
  const auto& L = part_.groups[g];
  const OptimizerShard s = optimizer_shard(g);
  const float* src = s.array(which);  // null: a split master, joined a chunk at a time
  std::vector<float> full(L.padded);
  if (cfg_.stage == 0) {
    if (src) optim_ops().copy_to_host(full.data(), src, DType::F32, L.padded);
    else join_to_host(full.data(), s.master_high, s.master_low, L.padded);
  } else {  // all-gather the shards a chunk at a time through a send buffer, then bring each over
    const size_t W = size_t(world_);
    // The shard goes on the wire from backend memory: a split master joined there, an offloaded one sent up.
    const bool stage_src = !src || (host_ops_ && !ops_.host_addressable());
    Buffer tmp(alloc_, chunk_shard_ * W, DType::F32, MemCategory::Other);
    Buffer joined(alloc_, stage_src ? chunk_shard_ : 0, DType::F32, MemCategory::Other);
    std::vector<float> host(chunk_shard_ * W);
    for (size_t a = 0; a < L.shard; a += chunk_shard_) {
      const size_t n = std::min(chunk_shard_, L.shard - a);
      if (!src)
        ops_.join_master(joined.as<float>(), static_cast<const char*>(s.master_high) + a * 2, s.master_low + a, n);
      else if (stage_src)
        ops_.upload(joined.data(), src + a, n * sizeof(float));
      comm_.all_gather(stage_src ? joined.as<float>() : src + a, tmp.data(), n, DType::F32);
      ops_.copy_to_host(host.data(), tmp.data(), DType::F32, n * W);
      for (size_t r = 0; r < W; ++r) std::copy_n(host.data() + r * n, n, full.data() + r * L.shard + a);
    }
  }
  full.resize(L.numel);
  return full;
}

void Engine::read_optimizer_state(int g, size_t begin, size_t count, float* master, float* m, float* v) const {
  const OptimizerShard s = optimizer_shard(g);
  ZERO_CHECK(begin + count <= s.count, "read_optimizer_state: [{}, {}) outside the shard of {} elements", begin,
             begin + count, s.count);
  const float* src[3] = {s.master, s.m, s.v};
  float* dst[3] = {master, m, v};
  for (int i = 0; i < 3; ++i) {
    if (!dst[i]) continue;
    if (src[i]) optim_ops().copy_to_host(dst[i], src[i] + begin, DType::F32, count);
    else join_to_host(dst[i], static_cast<const char*>(s.master_high) + begin * 2, s.master_low + begin, count);
  }
}

void Engine::write_optimizer_state(int g, size_t begin, size_t count, const float* master, const float* m,
                                   const float* v) {
  const OptimizerShard s = optimizer_shard(g);
  ZERO_CHECK(begin + count <= s.count, "write_optimizer_state: [{}, {}) outside the shard of {} elements", begin,
             begin + count, s.count);
  float* dst[3] = {s.master, s.m, s.v};
  const float* src[3] = {master, m, v};
  for (int i = 0; i < 3; ++i) {
    if (!src[i]) continue;
    if (dst[i]) optim_ops().copy_from_host(dst[i] + begin, DType::F32, src[i], count);
    else split_from_host(static_cast<char*>(s.master_high) + begin * 2, s.master_low + begin, src[i], count);
  }
}

}  // namespace zero
