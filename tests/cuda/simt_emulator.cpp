// The SIMT emulator's scheduler (simt_emulator.h): fibers, barriers, blocks. A fiber switch on x86-64 is
// a few instructions of our own (the System V callee-saved registers and the stack pointer: what a call
// may not change; the SSE and x87 control words are left alone, as nothing here changes them);
// elsewhere it is ucontext, whose swapcontext also saves the signal mask with a system call each time
// (an order of magnitude slower: the norm kernels' block sums switch every thread at every tree level).
// A thread that waits at a barrier, or finishes, hands the OS thread straight to the next runnable one (one
// switch, not two through the scheduler, whose stack then stays cold): the scheduler's loop resumes the first
// and gets control back only when no thread is left to run.
#include "tests/cuda/simt_emulator.h"

#include "core/splitmix.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace zero::simt {

namespace {
constexpr size_t kStackBytes = 256 * 1024;
// Each fiber's stack starts a different distance below its top (its colour): at one distance, every fiber's
// saved registers and top frames sit at one offset modulo the caches' set period, so a block's 256 fibers
// fight over one set of L1 and of L2 and each switch misses. Steps of 4 KiB + 64 B spread them over 64 L1
// sets and 2048 offsets of 64 B within 128 KiB.
constexpr size_t kColourBytes = 128 * 1024, kColourStep = 4096 + 64;
size_t next_colour() {
  static size_t n = 0;
  return (n++ * kColourStep) % kColourBytes;
}
}  // namespace

#if defined(__x86_64__)
extern "C" void zero_simt_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl zero_simt_switch
  .type zero_simt_switch, @function
zero_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size zero_simt_switch, .-zero_simt_switch
)");

struct Fiber {
  std::unique_ptr<char[]> stack{new char[kStackBytes + kColourBytes]};
  size_t colour = next_colour();
  void* sp = nullptr;
  bool done = false;
};
namespace {
void* scheduler_sp = nullptr;

void hand_off(Block& blk);  // below

[[noreturn]] void trampoline() {
  Block& blk = *current_block();
  blk.body();
  blk.fibers[blk.current]->done = true;
  hand_off(blk);  // never resumed
  std::abort();
}
// A fresh fiber's stack as zero_simt_switch leaves a suspended one: six registers and the return address
// trampoline; its frame starts as a called function's would (rsp + 8 16-byte aligned).
void prepare(Fiber& f) {
  auto top = reinterpret_cast<uintptr_t>(f.stack.get() + kStackBytes + kColourBytes - f.colour) & ~uintptr_t(15);
  auto* slot = reinterpret_cast<uint64_t*>(top - 16);
  slot[0] = reinterpret_cast<uint64_t>(&trampoline);
  for (int r = 1; r <= 6; ++r) slot[-r] = 0;  // rbp rbx r12 r13 r14 r15
  f.sp = &slot[-6];
  f.done = false;
}
void resume(Fiber& f) { zero_simt_switch(&scheduler_sp, f.sp); }
void jump(Fiber& from, Fiber& to) { zero_simt_switch(&from.sp, to.sp); }
void park(Fiber& f) { zero_simt_switch(&f.sp, scheduler_sp); }
}  // namespace
#else
struct Fiber {
  std::unique_ptr<char[]> stack{new char[kStackBytes]};
  ucontext_t ctx;
  bool done = false;
};
namespace {
ucontext_t scheduler_ctx;
void hand_off(Block& blk);  // below
void entry() {
  Block& blk = *current_block();
  blk.body();
  blk.fibers[blk.current]->done = true;
  hand_off(blk);  // never resumed
}
void prepare(Fiber& f) {
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack.get();
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = &scheduler_ctx;
  makecontext(&f.ctx, entry, 0);
  f.done = false;
}
void resume(Fiber& f) { swapcontext(&scheduler_ctx, &f.ctx); }
void jump(Fiber& from, Fiber& to) { swapcontext(&from.ctx, &to.ctx); }
void park(Fiber& f) { swapcontext(&f.ctx, &scheduler_ctx); }
}  // namespace
#endif

Block::Block(unsigned n, size_t smem_bytes)
    : threads(n), smem(smem_bytes, 16), warps((n + 31) / 32), async(n), runnable(n) {
  sync.expected = n;
  for (auto& w : warps) w.sync.expected = 32;
  for (unsigned t = 0; t < n; ++t) fibers.push_back(std::make_unique<Fiber>());
}
Block::~Block() = default;

Block& block_for(unsigned threads, size_t smem_bytes) {
  static std::unique_ptr<Block> cached;
  if (!cached || cached->threads != threads || cached->smem.size() < smem_bytes)
    cached = std::make_unique<Block>(threads, smem_bytes);
  // This launch's shared memory ends where the buffer does, at its guard page: an index past the size the
  // launch asked for faults, as it is an error on a GPU (which reports it only under compute-sanitizer).
  const size_t rounded = (smem_bytes + 15) / 16 * 16;
  const size_t held = (cached->smem.size() + 15) / 16 * 16;
  cached->smem_launch = cached->smem.data() + (held - rounded);
  cached->smem_launch_bytes = smem_bytes;
  current_block() = cached.get();
  return *cached;
}

namespace {
// ZERO_SIMT_SCHEDULE, read once (simt_emulator.h says what each order is for); another value is an error,
// so a misspelt schedule never passes as the default one.
enum class Schedule { in_order, reverse, ahead, random };
struct ScheduleChoice {
  Schedule kind = Schedule::in_order;
  uint64_t seed = 0;  // random:SEED's
};
// A schedule's name as ZERO_SIMT_SCHEDULE and use_schedule take it; false for none of them.
bool parse_schedule(const char* s, ScheduleChoice& out) {
  if (s == nullptr || *s == '\0') return out = ScheduleChoice{}, true;
  if (std::strcmp(s, "reverse") == 0) return out = ScheduleChoice{Schedule::reverse}, true;
  if (std::strcmp(s, "ahead") == 0) return out = ScheduleChoice{Schedule::ahead}, true;
  if (std::strncmp(s, "random:", 7) == 0 && s[7] != '\0' && s[7] != '-') {
    char* end = nullptr;
    const unsigned long long seed = std::strtoull(s + 7, &end, 10);
    if (*end == '\0') return out = ScheduleChoice{Schedule::random, seed}, true;
  }
  return false;
}
std::string bad_schedule(const char* s) {
  return std::string("simt emulator: schedule \"") + s + "\": expected reverse, ahead, random:SEED (SEED a non-negative "
         "integer) or none (the default order)";
}
ScheduleChoice& schedule_choice() {
  static ScheduleChoice chosen = [] {
    ScheduleChoice c;
    if (const char* s = std::getenv("ZERO_SIMT_SCHEDULE"); !parse_schedule(s, c)) {
      std::fprintf(stderr, "%s (ZERO_SIMT_SCHEDULE)\n", bad_schedule(s).c_str());
      std::exit(2);
    }
    return c;
  }();
  return chosen;
}
Schedule schedule() { return schedule_choice().kind; }
bool reverse_schedule() { return schedule() == Schedule::reverse; }

// The random schedule's generator state (core/splitmix.h: the same draws on every platform), restarted at
// each block from the seed and the block's index, so a block's interleaving depends on the seed alone, not on
// the launches before it.
uint64_t random_state = 0;

// The random schedule runs the runnable thread of highest priority (as PCT, probabilistic concurrency
// testing, does: a uniform draw of the next thread keeps every warp at the same pace, so a race that needs
// one warp far ahead of another would almost never show). Priorities are warp-major: the warps in a random
// order, each warp's lanes in a random order of its own. So the first warp runs as far as it can, through
// its own __syncwarp and collectives, before the next one moves; they are drawn again at the block's start
// and at each __syncthreads, so every phase between block barriers gets an order of its own.
void draw_priorities(Block& blk) {
  // A block is whole warps or one thread (launch()): `lanes` a warp, so the priorities are 0 .. threads - 1.
  const unsigned warps = unsigned(blk.warps.size()), lanes = std::min(32u, blk.threads);
  std::vector<unsigned> warp_rank(warps), lane_rank(lanes), priority(blk.threads);
  for (unsigned w = 0; w < warps; ++w) warp_rank[w] = w;
  splitmix_shuffle(warp_rank, splitmix64(random_state));
  for (unsigned w = 0; w < warps; ++w) {
    for (unsigned l = 0; l < lanes; ++l) lane_rank[l] = l;
    splitmix_shuffle(lane_rank, splitmix64(random_state));
    for (unsigned l = 0; l < lanes; ++l) priority[lanes * w + l] = lanes * warp_rank[w] + lane_rank[l];
  }
  blk.runnable.prioritise(priority);
}
}  // namespace

void use_schedule(const char* name) {
  ScheduleChoice c;
  if (!parse_schedule(name, c)) throw std::invalid_argument(bad_schedule(name));
  schedule_choice() = c;
}

// The ahead schedule lands every cp.async group as it is committed, the random one a group in two (a draw
// per group), the others none (simt_emulator.h cp_async_commit).
bool land_at_commit() {
  switch (schedule()) {
    case Schedule::ahead: return true;
    case Schedule::random: return (splitmix64(random_state) & 1) != 0;
    default: return false;
  }
}

// The thread that starts t-th after thread 0 (t = 1 .. threads - 1): ascending, or highest first in reverse.
static unsigned started_after_thread_0(const Block& block, unsigned t) {
  return reverse_schedule() ? block.threads - t : t;
}

namespace {
// The running thread (parked at a barrier, or done) gives the OS thread to the next runnable one, or back to
// the scheduler when none is left. The next may be itself (reverse schedule: the last arrival runs first
// when it has the highest index): then it simply goes on.
void hand_off(Block& blk) {
  Fiber& from = *blk.fibers[blk.current];
  if (blk.runnable.empty()) return park(from);
  const unsigned next = blk.runnable.pop_front();
  if (next == blk.current) return;
  blk.current = next;
  threadIdx = {next, 0, 0};
  jump(from, *blk.fibers[next]);
}
}  // namespace

void barrier_wait(Barrier& b) {
  Block& blk = *current_block();
  if (blk.direct)
    throw std::runtime_error("simt emulator: thread " + std::to_string(blk.current) +
                             " reached a barrier that thread 0 of its block did not (a divergent barrier)");
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    if (schedule() == Schedule::in_order) {  // the last to arrive goes on; the others follow in arrival order
      for (unsigned t : b.parked) blk.runnable.push_back(t);
      b.parked.clear();
      return;
    }
    if (schedule() == Schedule::ahead) {  // the same, but ahead of every thread already runnable
      for (auto t = b.parked.rbegin(); t != b.parked.rend(); ++t) blk.runnable.push_front(*t);
      b.parked.clear();
      return;
    }
    // Reverse: every thread past the barrier runs highest first, the last to arrive too. Random: the runnable
    // thread of highest priority runs next (hand_off), the last to arrive among them; a block barrier draws
    // the priorities anew.
    if (schedule() == Schedule::random && &b == &blk.sync) draw_priorities(blk);
    b.parked.push_back(blk.current);
    if (schedule() == Schedule::reverse) std::sort(b.parked.begin(), b.parked.end(), std::greater<unsigned>());
    for (unsigned t : b.parked) blk.runnable.push_back(t);
    b.parked.clear();
    hand_off(blk);
    return;
  }
  b.parked.push_back(blk.current);
  hand_off(blk);
}

// A block runs thread 0 first, as a fiber. A barrier must be reached by every thread of the block or warp
// (CUDA's rule), so if thread 0 finishes without reaching one, no thread may: the others then run as plain
// calls, one after another, with no fiber at all (the element-wise kernels' common case, where fibers
// would cost more than the work). A barrier one of them reaches after all is reported, not waited on.
// The blocks of a grid run one after another: in index order, highest first in reverse, in a random order
// (drawn from the seed and the grid's size) in random. A GPU runs them in any order, at once or not, so a
// kernel whose blocks depend on each other's writes fails in one of these.
void run_grid(Block& block, unsigned grid) {
  std::vector<unsigned> random_order;
  if (schedule() == Schedule::random) {
    random_order.resize(grid);
    for (unsigned b = 0; b < grid; ++b) random_order[b] = b;
    splitmix_shuffle(random_order, schedule_choice().seed * 0x9e3779b97f4a7c15ull ^ grid);
  }
  for (unsigned position = 0; position < grid; ++position) {
    const unsigned b = schedule() == Schedule::random ? random_order[position]
                       : reverse_schedule()           ? grid - 1 - position
                                                      : position;
    blockIdx = {b, 0, 0};
    if (schedule() == Schedule::random) {
      random_state = schedule_choice().seed * 0x2545f4914f6cdd1dull + b;
      draw_priorities(block);
    }
    std::memset(block.smem_launch, 0xff, block.smem_launch_bytes);
    for (AsyncCopies& a : block.async) {  // a block's copies never land in the next one's memory
      a.open.clear();  // (cleared, not replaced: a fresh deque allocates, for each thread of each block)
      a.groups.clear();
    }
    for (Warp& w : block.warps) w.reset_parities();
    prepare(*block.fibers[0]);
    block.current = 0;
    threadIdx = {0, 0, 0};
    resume(*block.fibers[0]);
    if (block.fibers[0]->done) {
      block.direct = true;
      try {
        for (unsigned t = 1; t < block.threads; ++t) {
          const unsigned u = started_after_thread_0(block, t);
          block.current = u;
          threadIdx = {u, 0, 0};
          block.body();
        }
      } catch (...) {
        block.direct = false;
        throw;
      }
      block.direct = false;
      continue;
    }
    for (unsigned t = 1; t < block.threads; ++t) {
      const unsigned u = started_after_thread_0(block, t);
      prepare(*block.fibers[u]);
      block.runnable.push_back(u);
    }
    // The threads hand the OS thread on among themselves (hand_off); it comes back here when none can run.
    if (!block.runnable.empty()) {
      block.current = block.runnable.pop_front();
      threadIdx = {block.current, 0, 0};
      resume(*block.fibers[block.current]);
    }
    unsigned stuck = 0;
    for (const auto& f : block.fibers) stuck += f->done ? 0 : 1;
    if (stuck > 0) {
      // Reset the barriers so the next launch starts clean; the stuck fibers are simply never resumed.
      block.sync.arrived = 0, block.sync.parked.clear();
      for (auto& w : block.warps) w.sync.arrived = 0, w.sync.parked.clear();
      throw std::runtime_error("simt emulator: block " + std::to_string(b) + ": " + std::to_string(stuck) + " of " +
                               std::to_string(block.threads) + " threads wait at a barrier the others never reach");
    }
  }
}

namespace {
StreamDeferral& stream_deferral() {
  static StreamDeferral deferral = nullptr;
  return deferral;
}
}  // namespace

void set_stream_deferral(StreamDeferral deferral) { stream_deferral() = deferral; }

void on_stream(cudaStream_t stream, std::function<void()> work) {
  if (StreamDeferral deferral = stream_deferral()) deferral(stream, std::move(work));
  else work();
}

}  // namespace zero::simt
