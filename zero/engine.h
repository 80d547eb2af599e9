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
// Stage 3: parameters sharded too; gather() all-gathers a group before use (prefetching the next
//          ones in the current direction), release() frees it.
#pragma once
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/memory.h"
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

struct StepResult {
  bool applied = false;
  double grad_norm = 0;    // of the mean gradient, before clipping
  float clip_coef = 1.0f;  // factor applied to the gradient (1 when not clipped)
  float lr = 0;
  int64_t step = 0;        // optimizer steps applied so far (skipped ones not counted)
  int bad_rank = -1;       // when skipped: lowest rank that saw a non-finite gradient (-1: after reduction)
  std::string bad_group;   // and the group it was in
};

// The rank's slice of one group's optimizer state: elements [begin, begin + count) of the group's
// padded flat range (elements at or past the group's numel are padding and stay zero).
struct OptimizerShard {
  size_t begin = 0;
  size_t count = 0;
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
};

class Engine {
 public:
  Engine(const EngineConfig& cfg, std::vector<GroupInfo> groups, Communicator& comm, DeviceOps& ops,
         TrackingAllocator& alloc);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Every rank fills the full fp32 value of each tensor (fill(group, tensor, dst[numel])); each keeps
  // what its stage owns. No communication.
  void init_params(const std::function<void(int group, int tensor, float* dst)>& fill);
  // Sets one tensor from its full fp32 value (streamed import: one tensor in memory at a time). Every
  // rank calls it with the same data; each keeps its part. No communication.
  void set_tensor(int group, int tensor, const float* full);

  void begin_micro_step();
  // Starts a forward-only pass (eval, scoring) outside accumulation: gather/release only.
  void begin_forward();
  const GroupView& gather(int g);
  void release(int g);
  void begin_backward();
  const GroupView& grad_view(int g);
  void grad_ready(int g);
  // The accumulation boundary: mean (divide by loss_divisor), norm, finite check, clip, AdamW, cast,
  // all-gather. Collective: every rank calls it with the same divisor.
  StepResult step(double loss_divisor);

  // Optimizer state of group g on this rank (checkpoints). After changing master, call sync_params().
  OptimizerShard optimizer_shard(int g) const;
  void sync_params();  // cast master to the compute dtype and all-gather as the stage needs (collective)
  int64_t optimizer_step() const { return step_; }
  void set_optimizer_step(int64_t s) { step_ = s; }
  // The full fp32 master of group g (numel elements) on every rank (collective at stages 1-3).
  std::vector<float> full_master(int g);

  const Partition& partition() const { return part_; }
  const std::vector<GroupInfo>& groups() const { return groups_; }
  const EngineConfig& config() const { return cfg_; }
  MemoryStats memory_report() const { return alloc_.stats(); }
  const CommReport& comm_report() const { return comm_.report(); }
  Communicator& comm() { return comm_; }

 private:
  struct Pending {
    int bucket;
    int slot;        // the staging slot of the bucket
    int chunk_slot;  // the send/recv pair it uses (-1: none, in place)
    bool last;       // the bucket's last chunk: completing it frees the staging slot
    CommHandle handle;
    std::function<void()> on_done;
  };
  enum class SlotState { Free, Filling, InFlight };

  bool sharded_params() const { return cfg_.stage == 3; }
  bool sharded_grads() const { return cfg_.stage >= 2; }
  bool last_micro() const { return micro_ == cfg_.accum_steps - 1; }
  void* at(const Buffer& b, size_t elem) const { return b.at(elem); }
  void acquire_slot(int bucket);
  void launch_bucket(int bucket);
  int acquire_chunk_slot();
  // Copies elements [a, a + n) of the bucket's concatenated shard space, for every destination rank,
  // rank-major into send (one reduce-scatter's input). src(g) is group g's full padded region.
  void pack_chunk(const Bucket& B, size_t a, size_t n, const std::function<void*(int)>& src, DType src_t, void* send);
  // Calls fn(group, offset in the group's shard, offset in [a, a + n), length) for each group piece.
  void for_each_piece(const Bucket& B, size_t a, size_t n, const std::function<void(int, size_t, size_t, size_t)>& fn) const;
  void complete_oldest();
  void complete_all();
  void start_gather(int g);
  int live_gathered() const;
  void free_gathered(int g);
  GroupView make_view(void* base, DType t, int g) const;
  void check_group(int g, const char* what) const;
  void* grad_for_optimizer(int g) const;
  void zero_accumulators();

  EngineConfig cfg_;
  std::vector<GroupInfo> groups_;
  Communicator& comm_;
  DeviceOps& ops_;
  TrackingAllocator& alloc_;
  Partition part_;
  int rank_ = 0, world_ = 1;

  Buffer params_;  // compute dtype: full padded (stages 0-2) or the shard (stage 3)
  Buffer accum_;   // accum dtype: full padded (stages 0-1) or the shard (stages 2-3)
  Buffer master_, m_, v_;
  Buffer staging_[2];                      // per bucket slot: the grad views of a whole bucket
  Buffer send_[2], recv_[2];               // per chunk slot: packed send, reduce-scatter output
  size_t chunk_shard_ = 0;                 // elements per rank in one reduction chunk
  bool chunk_busy_[2] = {false, false};
  int next_chunk_ = 0;
  SlotState slot_state_[2] = {SlotState::Free, SlotState::Free};
  int slot_bucket_[2] = {-1, -1};
  std::vector<size_t> offset_in_bucket_;   // group start inside its bucket's staging buffer
  std::deque<Pending> pending_;

  std::vector<Buffer> gathered_;           // stage 3
  std::vector<CommHandle> gather_handle_;
  std::vector<GroupView> param_views_, grad_views_;

  std::vector<int> bucket_ready_;          // groups ready in the current micro-step, per bucket
  int micro_ = -1;                         // current micro-step index within the accumulation
  bool backward_ = false;
  int64_t step_ = 0;
  int first_bad_group_ = -1;               // first group with a non-finite gradient this window
};

}  // namespace zero
