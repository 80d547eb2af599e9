// A SIMT emulator for running CUDA kernel source as host C++ (no GPU): every thread of a block is a fiber
// on the calling thread (simt_emulator.cpp: a register switch on x86-64, ucontext elsewhere), so the kernel's own code runs, thread by thread, with the CUDA
// semantics it relies on:
//   - threadIdx / blockIdx per thread; blocks of a grid one after another (in index order; highest first in
//     the reverse schedule, a random order in the random one: a GPU's is any); the block's dynamic shared
//     memory filled with 0xff bytes (NaN as floats, 0xffff as bf16) at each block's start, so a read of a
//     word nobody wrote shows, and ending at an inaccessible page (guarded_memory.h), so an index past
//     the size the launch asked for faults;
//   - __syncthreads: a barrier of the block's threads; __syncwarp: of the warp's;
//   - cp.async (16 bytes, global -> shared): queued by the issuing thread and done only when that thread's
//     cp.async.wait_group lets its group complete, so a read that comes before its wait (or, for another
//     thread's copy, before the barrier after that thread's wait) sees the old bytes, as it may on a GPU;
//     or, in the ahead schedule (below) and for a random half of the groups in the random one, done as its
//     group is committed, the earliest the emulator can, so a copy into a buffer another warp still reads
//     (its last reader not yet past a barrier) overwrites it, as it may on a GPU;
//     its addresses, and ldmatrix's row addresses, must be 16-byte aligned (an unaligned one aborts);
//   - warp collectives (__shfl_xor_sync, mma.sync m16n8k16 bf16, ldmatrix m8n8 x4 b16): each lane stages
//     its part in per-warp memory, a barrier of the warp's 32 threads, then each lane reads what it gets
//     (ldmatrix: the rows themselves, and a second barrier before any lane goes on; Warp); the product computed from the fragments exactly as the PTX ISA lays them out
//     (model/cuda/mma_fragments.h, itself checked against the ISA's figures in attention_grid_test), each
//     output a double-precision sum of its 16 products added to C once.
// A thread runs until it reaches a barrier, then the next runnable one; the last to arrive releases the
// others and goes on first, the rest following in arrival order, behind the threads already runnable
// (threads start in index order, thread 0 first). ZERO_SIMT_SCHEDULE=reverse runs them highest index first
// instead, after thread 0's start, and every thread past a barrier highest first. ZERO_SIMT_SCHEDULE=ahead
// starts them in index order but runs the threads a barrier releases before every thread already runnable:
// a warp through its __syncwarp or collective runs on, as one may on a GPU, while the block's other warps
// have not yet run up to it (in the other two a warp's threads past a collective queue behind the rest of
// the block, so no warp gets more than one barrier ahead of a thread still runnable).
// ZERO_SIMT_SCHEDULE=random:SEED runs the runnable thread of highest priority, the priorities random and
// warp-major (the warps in a random order, each running as far as it can before the next moves; its lanes in
// a random order of their own), drawn again at each __syncthreads, the generator restarted from SEED at each
// block: one order of the threads between barriers a seed. ctest runs each emulated kernel test all four
// ways (random with seed 1), so a missing barrier shows whichever side of it its reader stands, and a
// block-wide one missing between two warp-level steps shows too; tests/cuda/simt_race_hunt.sh runs a range
// of seeds. A block whose thread 0 reaches no barrier runs its other threads as plain calls (no fibers). One
// OS thread, a fixed schedule: the same run every time, whatever the machine's load. A block
// whose threads cannot all finish (a barrier some thread never reaches: divergent control flow around a
// collective, as would hang a GPU) makes launch() throw, naming how many threads were left waiting.
// A kernel file opts in with `#if defined(ZERO_SIMT_EMULATION)` around what only a GPU has (inline PTX;
// extern __shared__, behind cuda/dynamic_shared.cuh), calling simt::mma_m16n8k16_bf16 and
// simt::dynamic_shared instead, and launches through cuda/kernel_launch.cuh. Include this header before
// the kernel file. Small cases only: every thread's step through a barrier is a context switch.
#pragma once
#define ZERO_SIMT_EMULATION 1

#include <driver_types.h>     // cudaStream_t
#include <vector_functions.h>  // make_uint4 (host and device)
#include <vector_types.h>      // uint3, uint4, float4 (host and device)

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/math/bf16.h"
#include "tests/cuda/guarded_memory.h"
#include "tests/cuda/simt_schedule.h"  // use_schedule
#include "model/cuda/mma_fragments.h"

#define __launch_bounds__(...)
// A kernel's `__shared__` array is one per block; blocks run one after another on one OS thread, so a
// function-local static is exactly that. (Dynamic shared memory goes through cuda/dynamic_shared.cuh.)
#undef __shared__
#define __shared__ static

inline uint3 threadIdx{0, 0, 0};  // the running fiber's, set by the scheduler before each switch
inline uint3 blockIdx{0, 0, 0};
inline dim3 blockDim{1, 1, 1};
inline dim3 gridDim{1, 1, 1};

// Device intrinsics kernels call: round-to-nearest arithmetic is the host's (compile with
// -ffp-contract=off, as core/math's host includers do), bit casts are memcpy.
inline float __fadd_rn(float a, float b) { return a + b; }
inline unsigned int __float_as_uint(float x) {
  unsigned int u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
// CUDA's device overloads of min and max that kernels call unqualified.
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }

namespace zero::simt {

struct Barrier {
  unsigned expected = 0, arrived = 0;
  std::vector<unsigned> parked;  // threads waiting for the last arrival
};
// A warp's staging for its collectives. The shuffle's values and mma's fragments are double-buffered: at each
// collective of a kind a lane takes the buffer of its parity for that kind and flips it (the same in every lane,
// as a warp's lanes run the same collectives), so one barrier is enough. Lane L writes buffer p again only at
// the collective after next of that kind, after every lane has arrived at the next one's barrier, which each
// does only after reading buffer p. ldmatrix keeps a second barrier: its lanes read shared memory itself after
// the first, and on a GPU the warp's load is done before any lane goes on to write there.
struct Warp {
  Barrier sync;
  float f[2][32];                     // __shfl_xor_sync's values
  uint32_t a[2][32][4], b[2][32][2];  // mma's A and B fragments
  const uint16_t* rows[32];           // ldmatrix's row addresses
  uint8_t shuffle_parity[32], mma_parity[32];
  void reset_parities() { std::memset(shuffle_parity, 0, 32), std::memset(mma_parity, 0, 32); }
  // This lane's buffer for a collective of the kind `parity` counts, flipped for its next one.
  static int take(uint8_t (&parity)[32], int lane) {
    const int p = parity[lane];
    parity[lane] = uint8_t(p ^ 1);
    return p;
  }
};
// A thread's cp.async copies: those not yet committed, then the committed groups, oldest first.
struct AsyncCopy {
  void* dst;
  const void* src;  // null: zero-fill (src-size 0)
};
struct AsyncCopies {
  std::vector<AsyncCopy> open;
  std::deque<std::vector<AsyncCopy>> groups;
};
struct Fiber;  // simt_emulator.cpp
// The threads ready to run, in the order they run: a ring of the block's size (a thread is in it at most
// once: it is either running, parked at a barrier, or queued); in the random schedule, once prioritised, a
// bit per priority instead, the highest set running next.
struct RunQueue {
  explicit RunQueue(unsigned threads) : ring(threads + 1), by_priority(threads), ready((threads + 63) / 64) {}
  bool empty() const { return prioritised ? waiting == 0 : head == tail; }
  void push_back(unsigned t) {
    if (prioritised) {
      const unsigned p = priority[t];
      ready[p / 64] |= uint64_t(1) << (p % 64);
      ++waiting;
      return;
    }
    ring[tail] = t;
    tail = tail + 1 == ring.size() ? 0 : tail + 1;
  }
  void push_front(unsigned t) {  // first in, first out only
    head = head == 0 ? ring.size() - 1 : head - 1;
    ring[head] = t;
  }
  unsigned pop_front() {
    if (prioritised) {  // the highest priority waiting
      size_t word = ready.size() - 1;
      while (ready[word] == 0) --word;
      const unsigned p = unsigned(64 * word + 63 - unsigned(__builtin_clzll(ready[word])));
      ready[word] &= ~(uint64_t(1) << (p % 64));
      --waiting;
      return by_priority[p];
    }
    const unsigned t = ring[head];
    head = head + 1 == ring.size() ? 0 : head + 1;
    return t;
  }
  // From here on the thread of highest priority runs first (a permutation of 0 .. threads - 1 by thread), not
  // the first in; only while no thread waits, so none is queued under the old priorities.
  void prioritise(const std::vector<unsigned>& by_thread) {
    if (waiting != 0 || head != tail) std::abort();  // the emulator's own error: see the callers
    priority = by_thread;
    for (unsigned t = 0; t < by_thread.size(); ++t) by_priority[by_thread[t]] = t;
    prioritised = true;
  }
  std::vector<unsigned> ring;
  size_t head = 0, tail = 0;
  bool prioritised = false;
  std::vector<unsigned> priority, by_priority;  // thread -> priority, priority -> thread
  std::vector<uint64_t> ready;                  // a bit per priority: that thread waits
  unsigned waiting = 0;
};
// One launch's threads, reused by the next launch of as many threads (stacks are costly to set up).
struct Block {
  Block(unsigned threads, size_t smem_bytes);
  ~Block();
  unsigned threads;
  Barrier sync;
  GuardedBuffer smem;    // dynamic shared memory: the largest a launch of this block asked for
  char* smem_launch = nullptr;  // this launch's: its last byte the buffer's last, 16-byte aligned
  size_t smem_launch_bytes = 0;
  std::vector<Warp> warps;
  std::vector<AsyncCopies> async;  // per thread; emptied as each block starts
  std::vector<std::unique_ptr<Fiber>> fibers;
  RunQueue runnable;
  unsigned current = 0;
  bool direct = false;         // threads run as plain calls (thread 0 reached no barrier): none may wait
  std::function<void()> body;  // the kernel call of this launch
};
// The running launch's block: an inline variable, not a function of the emulator's library, so the kernels'
// every barrier and warp collective reads it without a call through the PLT.
inline Block* running_block = nullptr;  // one launch at a time
inline Block*& current_block() { return running_block; }
// A block of `threads` threads with at least `smem_bytes` of dynamic shared memory, made current.
Block& block_for(unsigned threads, size_t smem_bytes);
// Arrive at b; return once every expected thread has arrived (the last arrival releases the parked ones).
void barrier_wait(Barrier& b);
// Runs block.body over `grid` blocks; throws std::runtime_error when a block's threads cannot all finish.
void run_grid(Block& block, unsigned grid);

inline Warp& my_warp() { return current_block()->warps[threadIdx.x / 32]; }
inline int my_lane() { return int(threadIdx.x % 32); }

inline char* dynamic_shared() { return current_block()->smem_launch; }

// An address an instruction needs 16-byte aligned (cp.async of 16 bytes, ldmatrix's rows): a GPU faults on
// another ("misaligned address"), so the emulation stops with the instruction named.
inline void require_16_byte_aligned(const void* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0) return;
  std::fprintf(stderr, "simt emulator: %s address %p is not 16-byte aligned (thread %u of block %u)\n", what, p,
               threadIdx.x, blockIdx.x);
  std::abort();
}

// cp.async.cg.shared.global [dst], [src], 16, valid ? 16 : 0 (src unread when !valid: zero-fill).
inline void cp_async16(void* dst, const void* src, bool valid) {
  require_16_byte_aligned(dst, "cp.async shared");
  if (valid) require_16_byte_aligned(src, "cp.async global");
  current_block()->async[threadIdx.x].open.push_back({dst, valid ? src : nullptr});
}
inline void land(const std::vector<AsyncCopy>& group) {
  for (const AsyncCopy& c : group) {
    if (c.src) std::memcpy(c.dst, c.src, 16);
    else std::memset(c.dst, 0, 16);
  }
}
// Whether the group being committed lands at once (the schedule's choice: simt_emulator.cpp).
bool land_at_commit();
// cp.async.commit_group: this thread's uncommitted copies become its newest group; in the ahead schedule, and
// for some groups in the random one, they land at once (an empty group stands in for them).
inline void cp_async_commit() {
  AsyncCopies& a = current_block()->async[threadIdx.x];
  if (land_at_commit()) {
    land(a.open);
    a.groups.emplace_back();
  } else {
    a.groups.push_back(std::move(a.open));
  }
  a.open.clear();
}
// cp.async.wait_group n: this thread's groups complete, oldest first, until at most n are in flight.
inline void cp_async_wait(int n) {
  AsyncCopies& a = current_block()->async[threadIdx.x];
  while (int(a.groups.size()) > n) {
    land(a.groups.front());
    a.groups.pop_front();
  }
}

inline float shfl_xor(float v, int lane_mask) {
  Warp& w = my_warp();
  const int lane = my_lane(), p = Warp::take(w.shuffle_parity, lane);
  w.f[p][lane] = v;
  barrier_wait(w.sync);
  return w.f[p][lane ^ lane_mask];
}

// Where each element of mma's 16 x 16 A tile and 16 x 8 B tile sits in the warp's fragments: the lane and
// the element's index in it (the inverse of the PTX layout), so a lane reads just the 2 x 16 inputs of each
// of its outputs.
struct FragSource {
  uint8_t lane, elem;
};
struct MmaSources {
  FragSource a[16][16], b[16][8];
};
inline const MmaSources& mma_sources() {
  namespace layout = model::cuda_attention::mma;
  static const MmaSources sources = [] {
    MmaSources m{};
    for (int l = 0; l < 32; ++l) {
      for (int i = 0; i < 8; ++i) {
        const layout::FragIndex e = layout::a_index(l, i);
        m.a[e.row][e.col] = {uint8_t(l), uint8_t(i)};
      }
      for (int i = 0; i < 4; ++i) {
        const layout::FragIndex e = layout::b_index(l, i);
        m.b[e.row][e.col] = {uint8_t(l), uint8_t(i)};
      }
    }
    return m;
  }();
  return sources;
}
// Element i of a fragment of packed bf16 pairs, low half first.
template <size_t N>
inline float fragment_element(const uint32_t (&regs)[N], int i) {
  return math::bf16_to_f32(uint16_t(regs[i / 2] >> (16 * (i % 2))));
}

// D += A B for one warp: each lane hands in its fragments and gets its own 4 outputs.
inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  namespace layout = model::cuda_attention::mma;
  Warp& w = my_warp();
  const int lane = my_lane(), p = Warp::take(w.mma_parity, lane);
  std::memcpy(w.a[p][lane], a, sizeof a);
  std::memcpy(w.b[p][lane], b, sizeof b);
  barrier_wait(w.sync);
  const MmaSources& src = mma_sources();
  for (int i = 0; i < 4; ++i) {
    const layout::FragIndex e = layout::c_index(lane, i);
    double sum = 0.0;
    for (int k = 0; k < 16; ++k) {
      const FragSource sa = src.a[e.row][k], sb = src.b[k][e.col];
      sum += double(fragment_element(w.a[p][sa.lane], sa.elem)) * double(fragment_element(w.b[p][sb.lane], sb.elem));
    }
    d[i] = float(double(d[i]) + sum);
  }
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 for one warp: lane 8 i + j hands in the address of row j
// of matrix i (8 consecutive 16-bit elements); lane l gets register i from matrix i: the elements (l / 4,
// 2 (l % 4)) and (l / 4, 2 (l % 4) + 1), low half first, or with trans those of the transposed matrix,
// (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) (the PTX ISA's "Warp-level matrix load instruction").
inline void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row, bool trans) {
  require_16_byte_aligned(row, "ldmatrix row");
  Warp& w = my_warp();
  const int lane = my_lane();
  w.rows[lane] = row;
  barrier_wait(w.sync);
  const int group = lane / 4, pair = 2 * (lane % 4);
  for (int i = 0; i < 4; ++i) {
    const uint16_t lo = trans ? w.rows[8 * i + pair][group] : w.rows[8 * i + group][pair];
    const uint16_t hi = trans ? w.rows[8 * i + pair + 1][group] : w.rows[8 * i + group][pair + 1];
    r[i] = uint32_t(lo) | uint32_t(hi) << 16;
  }
  barrier_wait(w.sync);  // every lane has read the rows before any goes on (and writes there, or stages anew)
}

// Runs kernel(args...) over `grid` blocks of `threads` threads (a multiple of 32, or 1) with `smem_bytes`
// of dynamic shared memory. Throws std::runtime_error when a block's threads cannot all finish.
template <class Kernel, class... Args>
void launch(unsigned grid, unsigned threads, size_t smem_bytes, Kernel kernel, Args... args) {
  Block& block = block_for(threads, smem_bytes);
  block.body = [&] { kernel(args...); };
  blockDim = dim3(threads, 1, 1);
  gridDim = dim3(grid, 1, 1);
  run_grid(block, grid);
}

// Where a launch, or a kernel file's memset or memcpy, runs (cuda/kernel_launch.cuh): at once, in the plain
// emulator; queued on its stream where the emulated runtime defers streams (ZERO_EMULATED_STREAMS,
// tests/cuda/emulated/deferred_streams.h installs the deferral), to run when that stream gets to it.
using StreamDeferral = void (*)(cudaStream_t, std::function<void()>);
void set_stream_deferral(StreamDeferral deferral);
void on_stream(cudaStream_t stream, std::function<void()> work);

// launch() on `stream`: the arguments copied, as a kernel's are at its launch.
template <class Kernel, class... Args>
void launch_on(cudaStream_t stream, unsigned grid, unsigned threads, size_t smem_bytes, Kernel kernel, Args... args) {
  on_stream(stream, [=] { launch(grid, threads, smem_bytes, kernel, args...); });
}

}  // namespace zero::simt

inline void __syncthreads() { zero::simt::barrier_wait(zero::simt::current_block()->sync); }
inline void __syncwarp(unsigned /*mask: the whole warp*/ = 0xffffffffu) {
  zero::simt::barrier_wait(zero::simt::my_warp().sync);
}
inline float __shfl_xor_sync(unsigned /*mask: the whole warp, as every call here*/, float v, int lane_mask) {
  return zero::simt::shfl_xor(v, lane_mask);
}
[[noreturn]] inline void __trap() { std::abort(); }
