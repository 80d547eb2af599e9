// The ZeRO engine: owns every parameter, gradient and optimizer buffer (through the tracking
// allocator), partitions them over the data-parallel ranks by stage, and runs the collectives.
// One engine for all stages and both backends; it never includes a model header. The model sees
// parameters and gradient buffers as views, group by group (DESIGN.md §2 and docs/ARCHITECTURE.md):
//
//   begin_micro_step();
//   for g in 0..G-1:   view = gather(g); ...forward...; release(g);
//   begin_backward();
//   for g in G-1..0:   gather(g); grad_view(g) <- this micro-step's gradient (overwrite); grad_ready(g); release(g);
//   ... accum_steps micro-steps ..., then step(number of real pairs in the global batch).
//
// Stage 0: full params, grads and optimizer state; one all-reduce per bucket at the last micro-step.
// Stage 1: optimizer state sharded; one reduce-scatter per bucket at the last micro-step, all-gather after.
// Stage 2: gradients sharded too; every micro-step reduce-scatters each bucket as soon as backward
//          has produced it into an fp32 shard accumulator; all-gather after the step.
// Stage 3: parameters sharded too; gather() all-gathers a group before use into a fixed ring of
//          prefetch_depth + 1 slots allocated once (prefetching the next ones in the current
//          direction), release() gives its slot back.
//
// Hybrid sharding (FSDP's HYBRID_SHARD; ZeRO++'s hierarchical partitioning at stage 3): the state is
// sharded over a shard group, normally a node, and replicated across groups. `comm` is then the
// shard group and `replicas` the ranks holding this rank's shard in the other groups (one per group,
// in group order). Everything above runs inside the group; at the last micro-step each range of the
// accumulator is all-reduced across the replicas (in the reduce dtype, as inside the group) as soon as the group's own
// reduction of it completes, so the collectives that cross nodes are one all-reduce of a shard per step,
// hidden behind the rest of backward. Every group then steps on the sum over all ranks, bit for bit the
// same. Groups are consecutive blocks of ranks: the data-parallel rank is
// replicas.rank() * comm.world() + comm.rank() (comm/hybrid_groups.h splits a world so).
//
// Split groups (GroupInfo::splittable and larger than a bucket: an embedding) are never gathered or
// staged whole: the model uses gather_piece / release_piece in forward and grad_piece / piece_ready in
// backward, piece by piece (partition.h says what a piece is). Backward need not gather them.
//
// The host never reads backend memory directly: imports, exports and checkpoints go through the
// DeviceOps' copy_to_host / copy_from_host, and a step reads its norm and finite flags back once.
#pragma once
#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/chunks.h"
#include "core/memory.h"
#include "core/step_clock.h"
#include "zero/buffer_plan.h"
#include "zero/device_ops.h"
#include "zero/engine_config.h"
#include "zero/partition.h"

namespace zero {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  size_t numel = 0;
  template <class T> T* as() const { return static_cast<T*>(data); }
};
using GroupView = std::vector<TensorView>;  // one per tensor of the group, declaration order

// A contiguous run of a group's flat element space (its tensors concatenated in declaration order):
// elements [begin, begin + count) live at data. A piece's runs are ascending and disjoint; padding
// past the group's numel is never part of a run.
struct FlatRun {
  size_t begin = 0;
  size_t count = 0;
  void* data = nullptr;
};
struct PieceView {
  DType dtype = DType::F32;
  std::vector<FlatRun> runs;
};

struct StepResult {
  bool applied = false;
  double grad_norm = 0;    // of the mean gradient, before clipping
  float clip_coef = 1.0f;  // factor applied to the gradient (1 when not clipped)
  float lr = 0;
  int64_t step = 0;        // optimizer steps applied so far (skipped ones not counted)
  int bad_rank = -1;       // when skipped: lowest rank that saw a non-finite gradient (-1: after reduction)
  std::string bad_group;   // and the group it was in
  std::string bad_tensor;  // and that rank's first such tensor (declaration order)
};

// The rank's slice of one group's optimizer state: elements [begin, begin + count) of the group's
// padded flat range (elements at or past the group's numel are padding and stay zero). A split master
// (EngineConfig::split_master) has no fp32 array: master is null, and master_high (the rank's bf16 params
// over the same range) with master_low hold it; read_optimizer_state and full_optimizer_array join it.
enum class OptimArray : int { Master = 0, M = 1, V = 2 };

struct OptimizerShard {
  size_t begin = 0;
  size_t count = 0;
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  void* master_high = nullptr;
  uint16_t* master_low = nullptr;
  float* array(OptimArray a) const { return a == OptimArray::Master ? master : a == OptimArray::M ? m : v; }
};

class Engine {
 public:
  // `replicas` (hybrid sharding, above): null or one rank for plain sharding over `comm`.
  Engine(const EngineConfig& cfg, std::vector<GroupInfo> groups, Communicator& comm, DeviceOps& ops,
         TrackingAllocator& alloc, Communicator* replicas = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Every rank fills the full fp32 value of each tensor (fill(group, tensor, dst[numel])); each keeps
  // what its stage owns. No communication.
  void init_params(const std::function<void(int group, int tensor, float* dst)>& fill);
  // Sets one tensor from its full fp32 value (streamed import: one tensor in memory at a time). Every
  // rank calls it with the same data; each keeps its part. No communication.
  void set_tensor(int group, int tensor, const float* full);
  // Sets elements [first, first + count) of one tensor (a large tensor through a small host buffer: pmtrain's
  // init and HF import, a piece at a time). The same rules as set_tensor.
  void set_tensor_range(int group, int tensor, size_t first, size_t count, const float* src);
  // The elements [first, first + count) of one tensor that set_tensor_range keeps on this rank: all of them
  // where the rank holds full params (stages 0-2), its shard's part at stage 3 (count 0: none). A caller that
  // makes or reads the values (pmtrain's random init, the HF import) need give only these, 1/W of the work.
  ElementRange kept_tensor_range(int group, int tensor) const;

  void begin_micro_step();
  // Starts a forward-only pass (eval, scoring) outside accumulation: gather/release only.
  void begin_forward();
  const GroupView& gather(int g);
  void release(int g);
  void begin_backward();
  const GroupView& grad_view(int g);
  void grad_ready(int g);
  // Pieces of a split group (num_pieces(g) > 1); whole groups have one piece and use the calls above.
  int num_pieces(int g) const { return part_.groups.at(size_t(g)).pieces; }
  const PieceView& gather_piece(int g, int k);
  void release_piece(int g, int k);
  const PieceView& grad_piece(int g, int k);  // overwrite every run with this micro-step's gradient
  void piece_ready(int g, int k);
  // A micro-step without data (a rank whose share of a step is empty): the same collectives as a real
  // one with zero gradients, so every rank issues the same sequence.
  void empty_micro_step();
  // The accumulation boundary: mean (divide by loss_divisor), norm, finite check, clip, AdamW, cast,
  // all-gather. Collective: every rank calls it with the same divisor.
  StepResult step(double loss_divisor);
  // Micro-steps in the next accumulation window (token-budget batching varies it step by step; every
  // rank must set the same value). Only between steps.
  void set_accum_steps(int k);

  // Optimizer state of group g on this rank (checkpoints). After changing master, call sync_params().
  OptimizerShard optimizer_shard(int g) const;
  void sync_params();  // cast master to the compute dtype and all-gather as the stage needs (collective)
  int64_t optimizer_step() const { return step_; }
  void set_optimizer_step(int64_t s) { step_ = s; }
  // The full fp32 master (or m, or v) of group g, numel elements, on every rank (collective at stages
  // 1-3; gathered a reduction chunk at a time, so no buffer is sized by the group).
  std::vector<float> full_optimizer_array(int g, OptimArray a);
  std::vector<float> full_master(int g) { return full_optimizer_array(g, OptimArray::Master); }
  // Whether optimizer_shard's master, m and v are fp32 arrays the host reads in place: zero.offload's host
  // arrays, or a host backend's own without a split master (checkpoints then write them without a copy).
  bool optimizer_in_host_memory() const {
    return !cfg_.split_master && (host_ops_ != nullptr || ops_.host_addressable());
  }
  // This rank's optimizer arrays of group g to or from host memory (checkpoints): elements
  // [begin, begin + count) of optimizer_shard(g)'s range, each of master, m, v (null: skipped).
  void read_optimizer_state(int g, size_t begin, size_t count, float* master, float* m, float* v) const;
  void write_optimizer_state(int g, size_t begin, size_t count, const float* master, const float* m, const float* v);

  const Partition& partition() const { return part_; }
  const std::vector<GroupInfo>& groups() const { return groups_; }
  const EngineConfig& config() const { return cfg_; }
  DeviceOps& ops() { return ops_; }
  MemoryStats memory_report() const { return alloc_.stats(); }  // the backend's memory (all of it on the CPU)
  // zero.offload on a device backend: the host memory holding the optimizer (master, m, v, staging); empty
  // otherwise (the CPU backend's one allocator has it all).
  MemoryStats host_memory_report() const {
    return host_alloc_ ? host_alloc_->stats() + host_staging_alloc_->stats() : MemoryStats{};
  }
  const CommReport& comm_report() const { return comm_.report(); }
  Communicator& comm() { return comm_; }  // the shard group
  int rank() const { return rank_; }       // in the shard group
  // Hybrid sharding: the communicator across shard groups (null without), and its collectives' counts.
  Communicator* replicas() const { return replicated() ? replicas_ : nullptr; }
  CommReport replica_comm_report() const { return replicated() ? replicas_->report() : CommReport{}; }
  // The rank and world of data parallelism: all ranks, over every shard group (the shard group's without).
  int data_rank() const { return data_rank_; }
  int data_world() const { return data_world_; }
  // Times the engine's work into `clock` (null: untimed): grad_view / grad_ready and their piece forms as
  // grad_buckets, step() as optimizer, and every start of and wait for a collective (host wait, or the
  // compute stream's enqueue_wait) as comm, nested scopes counting apart (core/step_clock.h).
  void set_step_clock(StepClock* clock) { clock_ = clock; }

 private:
  // A reduction in flight. Staging slots never wait for one: their data is copied into a send
  // buffer (or the accumulator) before the reduction starts.
  struct Pending {
    int chunk_slot;  // the send/recv pair it uses, or F + the replica chunk (-1: none, in place)
    CommHandle handle;
    std::function<void()> on_done;
  };
  enum class SlotState { Free, Filling };
  void push_pending(int chunk_slot, CommHandle h, std::function<void()> on_done);
  // Starts a collective inside a comm scope: the call itself can be host work (MPI copies or progresses
  // inside it), which is communication as much as the wait.
  template <class F>
  CommHandle start_timed(F&& start) {
    const StepClock::Scope timed(clock_, TimeCategory::Comm);
    return start();
  }

  bool sharded_params() const { return cfg_.stage == 3; }
  // This rank's params over group g's optimizer range (what sync_params writes from the master).
  void* own_params(int g) const;
  // A split master's transfers: fp32 from host memory into (high, low) (low null: the high halves only),
  // and joined back to the host, a transfer chunk of backend scratch at a time.
  size_t transfer_chunk() const { return std::max<size_t>(1, chunk_shard_ * size_t(world_)); }
  void split_from_host(void* high, uint16_t* low, const float* src, size_t n);
  void join_to_host(float* dst, const void* high, const uint16_t* low, size_t n) const;
  bool sharded_grads() const { return cfg_.stage >= 2; }
  bool last_micro() const { return micro_ == cfg_.accum_steps - 1; }
  // The first micro-step of a step writes each range of the accumulator instead of adding into it: the last
  // step's sums are spent, and nothing clears them (that pass, and the fold's read, cost 8 bytes a parameter).
  bool first_micro() const { return micro_ <= 0; }
  // acc (accum dtype) = src, or += src: `first` is first_micro() when the fold was queued (a reduced chunk folds
  // when its collective completes, which may be in a later micro-step).
  void fold(bool first, void* acc, const void* src, DType src_t, size_t n);
  void* at(const Buffer& b, size_t elem) const { return b.at(elem); }
  // Staging slots: a whole bucket, or one piece of a split group's bucket.
  static int slot_of(int bucket, int piece) { return (bucket + piece) % 2; }
  int acquire_slot(int bucket, int piece);
  // ConfigError if unit u's gradient was handed in already this micro-step, naming the call: piece_ready(g, k)
  // (`piece`) or grad_ready(g). grad_ready and piece_ready check it first.
  void require_not_handed_in(int u, bool piece) const;
  void unit_ready(int u);  // unit u's gradient is in (checked not yet): counts it and launches its bucket when full
  // ConfigError naming the first group (and piece) whose gradient did not arrive this micro-step, if any.
  void require_all_ready(const char* where) const;
  // fn(tensor, lo, hi) for each tensor of group g overlapping its flat elements [begin, end), clipped.
  template <class F>
  void for_each_tensor_in(int g, size_t begin, size_t end, F&& fn) const {
    const auto& L = part_.groups[g];
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
      const size_t t0 = L.tensor_offsets[t], t1 = t0 + groups_[g].tensors[t].numel;
      const size_t lo = std::max(t0, begin), hi = std::min(t1, end);
      if (lo < hi) fn(t, lo, hi);
    }
  }
  // fn(lo, hi, decay) for each run of consecutive tensors of group g in its flat elements [begin, end) (clipped,
  // padding skipped) that AdamW updates alike: the same weight-decay factor, so every tensor alike when
  // weight_decay is 0. AdamW is per element, so a call a run gives the bits of a call a tensor in fewer launches
  // (a Qwen3 layer's eleven tensors all decay: one launch a group, not eleven).
  template <class F>
  void for_each_adamw_run(int g, size_t begin, size_t end, F&& fn) const {
    const bool decays = cfg_.adamw.weight_decay != 0;
    bool open = false, run_decay = false;
    size_t run_lo = 0, run_hi = 0;
    for_each_tensor_in(g, begin, end, [&](size_t t, size_t lo, size_t hi) {
      const bool decay = decays && groups_[g].tensors[t].weight_decay;
      if (open && decay == run_decay && lo == run_hi) {
        run_hi = hi;
        return;
      }
      if (open) fn(run_lo, run_hi, run_decay);
      open = true, run_lo = lo, run_hi = hi, run_decay = decay;
    });
    if (open) fn(run_lo, run_hi, run_decay);
  }
  void launch_bucket(int bucket);
  void launch_piece(int g, int k, int slot);
  // The chunk slots [0, F) and the replica chunks' slots [F, 2 F) (F = kReductionsInFlight), each set taken in
  // turn; a busy slot is waited for by completing the oldest collectives.
  int acquire_busy_slot(int first, int& next);
  int acquire_chunk_slot() { return acquire_busy_slot(0, next_chunk_); }
  int acquire_replica_slot() { return acquire_busy_slot(kReductionsInFlight, next_replica_chunk_); }
  // Copies elements [a, a + n) of the bucket's concatenated shard space, for every destination rank,
  // rank-major into send (one reduce-scatter's input). src(g) is group g's full padded region.
  void pack_chunk(const Bucket& B, size_t a, size_t n, const std::function<void*(int)>& src, DType src_t, void* send);
  // Calls fn(group, offset in the group's shard, offset in [a, a + n), length) for each group piece.
  void for_each_piece(const Bucket& B, size_t a, size_t n, const std::function<void(int, size_t, size_t, size_t)>& fn) const;
  void complete_oldest();
  void complete_all();
  bool replicated() const { return replicas_ != nullptr && replicas_->world() > 1; }
  // Accumulator elements [offset, offset + n) hold the group's sum: under hybrid sharding, all-reduces them
  // across the replicas, in place a transfer chunk at a time, or through the replica chunks in the reduce dtype
  // (replica_reduction_buffered), completed with the group's reductions (by complete_all at the latest); else
  // nothing.
  void reduce_across_replicas(size_t offset, size_t n);
  // Stage-3 gather units: group g's piece k is unit unit_base_[g] + k.
  int unit_of(int g, int k) const { return unit_base_[g] + k; }
  void start_gather(int unit);
  void* gather_unit(int unit);  // waits for (or starts) the unit's all-gather; returns its ring slot
  void prefetch_after(int g, int k);
  void free_unit(int unit);
  void free_all_units();
  PieceView make_piece_view(int g, int k, void* base, bool rank_major) const;
  GroupView make_view(void* base, DType t, int g) const;
  void count_nonfinite(int g, size_t flat_begin, const void* data, size_t n);
  // Fixed-point sums hold at most math::kFixedMaxTerms micro-batches a step (ConfigError past it).
  void check_fixed_point_terms(int accum_steps) const;
  void check_group(int g, const char* what) const;
  void* grad_for_optimizer(int g) const;
  // Where the optimizer's arrays live and who steps them: the host under zero.offload, else the backend.
  DeviceOps& optim_ops() const { return host_ops_ ? *host_ops_ : ops_; }
  // zero.offload: AdamW on group g's range a chunk at a time (its gradients brought down to host staging),
  // and the master cast to the param dtype and sent up into this rank's params (sync_params).
  void offload_adamw(int g, const OptimizerShard& s, float lr, float grad_scale);
  void offload_upload_params(const OptimizerShard& s, void* params);

  EngineConfig cfg_;
  std::vector<GroupInfo> groups_;
  Communicator& comm_;
  Communicator* replicas_ = nullptr;
  int data_rank_ = 0, data_world_ = 1;
  DeviceOps& ops_;
  TrackingAllocator& alloc_;
  Partition part_;
  int rank_ = 0, world_ = 1;
  // zero.offload: the host allocator of the optimizer's arrays (a device backend only; declared before the
  // buffers it holds, so it outlives them) and the host ops that step them.
  std::unique_ptr<TrackingAllocator> host_alloc_;
  std::unique_ptr<TrackingAllocator> host_staging_alloc_;  // the backend's staging memory (CUDA: page-locked)
  std::unique_ptr<DeviceOps> host_ops_;
  // zero.offload's staging, a buffer per transfer slot: chunks of gradients (accum dtype) and params (param
  // dtype), one copied while the host works on the other.
  Buffer host_grad_[DeviceOps::kTransferSlots], host_params_[DeviceOps::kTransferSlots];

  Buffer params_;  // compute dtype: full padded (stages 0-2) or the shard (stage 3)
  Buffer accum_;   // accum dtype: full padded (stages 0-1) or the shard (stages 2-3)
  Buffer master_, m_, v_;
  BufferPlan plan_;
  Buffer staging_[2];                      // per bucket slot: the grad views of a bucket (or one piece)
  Buffer send_[kReductionsInFlight], recv_[kReductionsInFlight];  // per chunk slot: packed send, reduce-scatter output
  size_t chunk_shard_ = 0;                 // elements per rank in one reduction chunk
  Buffer replica_send_[kReductionsInFlight];  // hybrid sharding in the reduce dtype (plan_.replica_chunk)
  bool chunk_busy_[2 * kReductionsInFlight] = {};  // chunk slots, then replica chunks (acquire_busy_slot)
  int next_chunk_ = 0, next_replica_chunk_ = 0;
  SlotState slot_state_[2] = {SlotState::Free, SlotState::Free};
  int slot_bucket_[2] = {-1, -1};
  int slot_piece_[2] = {0, 0};
  std::vector<size_t> offset_in_bucket_;   // group start inside its bucket's staging buffer
  std::deque<Pending> pending_;

  std::vector<Buffer> ring_;               // stage 3: prefetch_depth + 1 gather slots, allocated once
  std::vector<int> ring_unit_;             // unit held by each slot (-1: free)
  std::vector<CommHandle> ring_handle_;    // its all-gather while in flight
  std::vector<int> unit_slot_;             // ring slot of each unit (-1: not gathered)
  std::vector<int> unit_base_;             // first unit of each group
  std::vector<std::pair<int, int>> unit_piece_;  // (group, piece) of each unit
  std::vector<GroupView> param_views_, grad_views_;
  std::vector<PieceView> piece_views_, grad_piece_views_;  // per unit

  Buffer partials_;                        // fp64 in backend memory: [0] sum of squares, [1 + tensor] non-finite counts,
                                           // then (fixed-point sums) the exact sum of squares' kFixedSquareWords words
  std::vector<size_t> tensor_base_;        // first partials_ index of each group's tensors

  std::vector<int> bucket_ready_;          // units (groups, pieces) ready in the current micro-step, per bucket
  std::vector<uint8_t> unit_ready_;        // per unit: its gradient arrived in the current micro-step
  std::vector<int> bucket_units_;          // units per bucket
  int micro_ = -1;                         // current micro-step index within the accumulation
  std::vector<size_t> count_ends_;         // count_nonfinite's runs (kept: no allocation in a step)
  bool backward_ = false;
  int64_t step_ = 0;
  StepClock* clock_ = nullptr;
};

}  // namespace zero
