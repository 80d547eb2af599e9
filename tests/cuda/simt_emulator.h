// A SIMT emulator for running CUDA kernel source as host C++ (no GPU): every thread of a block is an OS
// thread, so the kernel's own code runs, thread by thread, with the CUDA semantics it relies on:
//   - threadIdx / blockIdx per thread; blocks of a grid one after another (a block's threads all finish
//     before the next block starts); the block's dynamic shared memory filled with 0xff bytes (NaN as
//     floats, 0xffff as bf16) at each block's start, so a read of a word nobody wrote shows;
//   - __syncthreads: a barrier of the block's threads;
//   - warp collectives (__shfl_xor_sync, mma.sync m16n8k16 bf16): a barrier of the warp's 32 threads
//     around an exchange through per-warp staging, the product computed from the fragments exactly as
//     the PTX ISA lays them out (model/cuda/mma_fragments.h, itself checked against the ISA's figures in
//     attention_grid_test), each output a double-precision sum of its 16 products added to C once.
// A kernel file opts in with `#if defined(ZERO_SIMT_EMULATION)` around what only a GPU has (inline PTX,
// extern __shared__), calling simt::mma_m16n8k16_bf16 and simt::dynamic_shared instead. Include this header
// before the kernel file. Slow (every warp step is a barrier of OS threads): small cases only.
// Control flow must be warp-uniform around collectives, as on the GPU (a divergent mma would hang here).
#pragma once
#define ZERO_SIMT_EMULATION 1

#include <vector_functions.h>  // make_uint4 (host and device)
#include <vector_types.h>      // uint3, uint4, float4 (host and device)

#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/math/bf16.h"
#include "model/cuda/mma_fragments.h"

#define __launch_bounds__(...)

inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};

namespace zero::simt {

struct Warp {
  std::barrier<> sync{32};
  float f[32];
  uint32_t a[32][4], b[32][2];
};
struct Block {
  explicit Block(unsigned threads, size_t smem_bytes)
      : sync(threads), smem((smem_bytes + 15) / 16 + 1), warps(threads / 32) {
    for (auto& w : warps) w = std::make_unique<Warp>();
  }
  std::barrier<> sync;
  std::vector<float4> smem;  // 16-byte aligned, as dynamic shared memory is
  std::vector<std::unique_ptr<Warp>> warps;
};
inline Block*& current_block() {
  static Block* block = nullptr;  // one launch at a time
  return block;
}
inline Warp& my_warp() { return *current_block()->warps[threadIdx.x / 32]; }
inline int my_lane() { return int(threadIdx.x % 32); }

inline char* dynamic_shared() { return reinterpret_cast<char*>(current_block()->smem.data()); }

inline float shfl_xor(float v, int lane_mask) {
  Warp& w = my_warp();
  const int lane = my_lane();
  w.f[lane] = v;
  w.sync.arrive_and_wait();
  const float got = w.f[lane ^ lane_mask];
  w.sync.arrive_and_wait();  // nobody overwrites f before every lane has read
  return got;
}

// D += A B for one warp: each lane hands in its fragments and gets its own 4 outputs.
inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  Warp& w = my_warp();
  const int lane = my_lane();
  std::memcpy(w.a[lane], a, sizeof a);
  std::memcpy(w.b[lane], b, sizeof b);
  w.sync.arrive_and_wait();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 8; ++i) {
      const model::cuda_attention::mma::FragIndex e = model::cuda_attention::mma::a_index(l, i);
      A[e.row][e.col] = math::bf16_to_f32(uint16_t(w.a[l][i / 2] >> (16 * (i % 2))));
    }
    for (int i = 0; i < 4; ++i) {
      const model::cuda_attention::mma::FragIndex e = model::cuda_attention::mma::b_index(l, i);
      B[e.row][e.col] = math::bf16_to_f32(uint16_t(w.b[l][i / 2] >> (16 * (i % 2))));
    }
  }
  w.sync.arrive_and_wait();  // every lane has read the staging before the next product overwrites it
  for (int i = 0; i < 4; ++i) {
    const model::cuda_attention::mma::FragIndex e = model::cuda_attention::mma::c_index(lane, i);
    double sum = 0.0;
    for (int k = 0; k < 16; ++k) sum += double(A[e.row][k]) * double(B[k][e.col]);
    d[i] = float(double(d[i]) + sum);
  }
}

// Runs kernel(args...) over `grid` blocks of `threads` threads (a multiple of 32) with `smem_bytes` of
// dynamic shared memory.
template <class Kernel, class... Args>
void launch(unsigned grid, unsigned threads, size_t smem_bytes, Kernel kernel, Args... args) {
  Block block(threads, smem_bytes);
  current_block() = &block;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      threadIdx = {t, 0, 0};
      for (unsigned b = 0; b < grid; ++b) {
        blockIdx = {b, 0, 0};
        if (t == 0) std::memset(block.smem.data(), 0xff, block.smem.size() * sizeof(float4));
        block.sync.arrive_and_wait();  // shared memory is fresh garbage before any thread of the block runs
        kernel(args...);
        block.sync.arrive_and_wait();  // the block is done before the next one touches shared memory
      }
    });
  }
  for (auto& th : pool) th.join();
  current_block() = nullptr;
}

}  // namespace zero::simt

inline void __syncthreads() { zero::simt::current_block()->sync.arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned /*mask: the whole warp, as every call here*/, float v, int lane_mask) {
  return zero::simt::shfl_xor(v, lane_mask);
}
[[noreturn]] inline void __trap() { std::abort(); }
