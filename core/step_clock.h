// StepClock: where one training step's time goes, by category (GEMMs, attention, the model's element-wise
// ops, the engine's gradient buckets, the optimizer step, waits for collectives). The model's ops and the
// engine open a Scope around each piece of work; the trainer takes the totals once per step and reports
// the rest of the step's wall time as "other" (host work, idle, what no scope covers).
//
// Scopes nest and count exclusively: an inner scope pauses the outer one (the optimizer step's wait for
// the norm's all-reduce counts as comm, not as optimizer), so the categories never sum past the wall time.
// The clock only records timestamps ("marks") at scope boundaries; what a timestamp is belongs to the
// backend: the host's steady_clock (the CPU backend, whose work is synchronous), or a cudaEvent on the
// compute stream (cuda/event_step_clock.h: the stream's time, resolved after the step, no host wait).
// Each boundary also takes the host's steady_clock, so on a device clock every category and op has two times:
// the device's (its stream's time between the boundaries) and the host's (its time issuing the work between
// them: launches, argument checks, allocations). Where the host's comes near the device's, the stream was
// waiting on the host's launches (a launch-bound op: fewer, larger kernels or a CUDA graph help, a faster
// kernel does not); where the device's is far above, the work itself takes the time.
// A clock is not thread-safe: one per rank, driven from the thread that issues the work.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace zero {

enum class TimeCategory : uint8_t {
  Gemm,         // the model's linear layers: forward, input gradient, weight gradient
  Attention,    // attention forward and backward
  Elementwise,  // the model's other ops: norms, q/k norm + RoPE, SwiGLU, residual adds, embedding, head, loss
  GradBuckets,  // the engine's per-micro-step gradient work: zeroing views, finite counts, accumulate, pack
  Optimizer,    // the engine's step: norm, clip, AdamW, cast (its collective waits count as comm)
  Comm,         // the host (MPI) or the compute stream (NCCL) waiting for a collective
  Count
};
constexpr size_t kTimeCategories = static_cast<size_t>(TimeCategory::Count);
// "gemm", "attention", "elementwise", "grad_buckets", "optimizer", "comm" (the metrics.jsonl keys).
const char* time_category_name(TimeCategory c);

// The least work a scope's op must do, as its caller counts it from the tensors it hands over: the bytes it
// reads and writes once each, and its matmul FLOPs. Divided by the op's time, its rate against the device's
// bandwidth and peak (pmtrain bench: "rmsnorm_backward 1.23 ms, 410 GB/s"), so the ops far from their roof show.
struct OpWork {
  double bytes = 0;
  double flops = 0;
};

// Seconds and scope counts per category over a window (one step, or a run), and per named op (the model's
// ops and the engine's step name their scopes: "swiglu_backward", "adamw", ...; the profile inside a
// category, in first-seen order), with the work their calls declared.
struct OpTime {
  const char* name;  // a string literal: compared by address, as the clock's scopes give it
  TimeCategory category = TimeCategory::Count;  // the category of its scopes (an op is entered under one)
  double seconds = 0;
  uint64_t calls = 0;
  OpWork work;  // summed over the calls
  double host_seconds = 0;  // the host's time in its scopes (StepTimes::host_seconds)
  uint64_t launches = 0;    // the device work its scopes queued, as the clock's backend counts it (0: none counted)
};
struct StepTimes {
  std::array<double, kTimeCategories> seconds{};
  std::array<uint64_t, kTimeCategories> calls{};
  std::vector<OpTime> ops;
  // The host's steady_clock between the same boundaries: on a device clock the time spent issuing each
  // category's work; on the host clock the same as `seconds` (device_timed false: nothing to tell apart).
  std::array<double, kTimeCategories> host_seconds{};
  bool device_timed = false;
  double of(TimeCategory c) const { return seconds[static_cast<size_t>(c)]; }
  double host_of(TimeCategory c) const { return host_seconds[static_cast<size_t>(c)]; }
  uint64_t calls_of(TimeCategory c) const { return calls[static_cast<size_t>(c)]; }
  double total() const;  // the sum of the categories
  StepTimes& operator+=(const StepTimes& o);
};

class StepClock {
 public:
  virtual ~StepClock() = default;

  // Time from here to the matching leave() counts to c (minus nested scopes), and to `op` when one is named
  // (a string literal: the clock keeps its address), whose calls add up `work`.
  void enter(TimeCategory c, const char* op = nullptr, OpWork work = {});
  void leave();
  // RAII form; a null clock times nothing (a model or engine without a clock pays one branch).
  class Scope {
   public:
    Scope(StepClock* clock, TimeCategory c, const char* op = nullptr, OpWork work = {}) : clock_(clock) {
      if (clock_) clock_->enter(c, op, work);
    }
    ~Scope() {
      if (clock_) clock_->leave();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepClock* clock_;
  };

  // The times of the scopes since the last take() or discard(), then starts a new window. Call it between
  // scopes, after the work was synchronised (a device clock resolves its events here).
  StepTimes take();
  // Starts a new window without resolving (work that should not count: evaluation between steps).
  void discard();

 protected:
  // Whether record()'s timestamps are a device's (the host's own are taken at every boundary regardless).
  explicit StepClock(bool device_timed) : device_timed_(device_timed) {}
  // Records timestamp `i` of the window (0, 1, ...; indices are reused from 0 after take/discard).
  virtual void record(size_t i) = 0;
  // gaps[i] = seconds from timestamp i to i + 1, for the n = gaps.size() + 1 timestamps of the window.
  virtual void resolve(std::span<double> gaps) = 0;
  // The host's steady_clock at each timestamp of the window (taken after record(i) returned).
  std::span<const std::chrono::steady_clock::time_point> host_times() const { return host_t_; }
  // The backend's count of work queued so far (cuda/launch_count.h's launches), read at every timestamp: each
  // op's launches are the difference over its scopes. The host clock counts none.
  virtual uint64_t launches_now() const { return 0; }

 private:
  void mark();  // a timestamp at a scope boundary; the category on top of the stack owns the time after it
  std::vector<TimeCategory> open_;   // the scope stack
  std::vector<const char*> open_ops_;  // and the op each scope names (null: none)
  std::vector<int8_t> owner_;        // per timestamp: the category that owns the time after it (-1: none)
  std::vector<const char*> owner_op_;  // per timestamp: the named op that owns it (null: none)
  std::vector<OpTime> op_calls_;     // the window's named ops and their scope counts
  std::vector<double> gaps_;
  std::array<uint64_t, kTimeCategories> calls_{};
  std::vector<std::chrono::steady_clock::time_point> host_t_;  // per timestamp; grows to a step's, then reused
  std::vector<uint64_t> launch_t_;  // per timestamp: launches_now(), likewise
  bool device_timed_;
};

// The CPU backend's clock: the host's steady_clock (its ops finish before they return).
class HostStepClock final : public StepClock {
 public:
  HostStepClock() : StepClock(false) {}

 protected:
  void record(size_t) override {}  // the host's timestamps are the base's
  void resolve(std::span<double> gaps) override;
};

}  // namespace zero
