// model/cuda/activation_pool.h on the device (the emulated runtime in CI): a large free block serves a
// smaller request split, its pieces merge back when freed, blocks never overlap and keep their contents, and
// micro-batches of changing token counts (token budgets) keep the pool near its peak in use instead of a
// block of every size seen (the H200 run: 87.5 GiB in use for 36.6 GiB of activations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "cuda/check.h"
#include "model/cuda/activation_pool.h"
#include "tests/cuda/cuda_test_util.h"

namespace zero::model::cuda_pool {
namespace {

constexpr size_t MiB = size_t(1) << 20;

TEST(ActivationPool, AFreeBlockIsSplitForSmallerRequestsAndMergedWhenFreed) {
  ZERO_SKIP_WITHOUT_CUDA();
  ActivationPool pool;
  char* keep = static_cast<char*>(pool.alloc(512));  // in use throughout: the pool never consolidates here
  char* a = static_cast<char*>(pool.alloc(10 * MiB));  // a segment of its own
  pool.free(a);
  char* b = static_cast<char*>(pool.alloc(4 * MiB));  // the 10 MiB block, cut: 4 used, 6 free after it
  char* c = static_cast<char*>(pool.alloc(5 * MiB + 1));  // 5 MiB + 512 of the rest
  EXPECT_EQ(pool.stats().device_mallocs, 2u);
  EXPECT_EQ(b, a);
  EXPECT_EQ(c, a + 4 * MiB);
  EXPECT_EQ(pool.stats().in_use_bytes, 512 + 9 * MiB + 512);
  char* d = static_cast<char*>(pool.alloc(2 * MiB));  // no free block holds it, the free bytes do not: a segment
  EXPECT_EQ(pool.stats().device_mallocs, 3u);
  pool.free(c);
  pool.free(b);  // merges with c's piece and the rest: the whole 10 MiB again
  EXPECT_EQ(pool.alloc(10 * MiB), a);
  EXPECT_EQ(pool.stats().device_mallocs, 3u);
  EXPECT_EQ(pool.stats().held_bytes, 512 + 12 * MiB);
  EXPECT_EQ(pool.stats().segments_released, 0u);
  pool.free(a);
  pool.free(d);
  pool.free(keep);  // nothing in use, three segments: all go back, the next request makes one arena of them
  EXPECT_EQ(pool.stats().held_bytes, 0u);
  EXPECT_EQ(pool.stats().segments_released, 3u);
  char* x = static_cast<char*>(pool.alloc(MiB));
  EXPECT_EQ(pool.stats().held_bytes, 512 + 12 * MiB);
  char* y = static_cast<char*>(pool.alloc(11 * MiB));  // in the arena, beside x
  EXPECT_EQ(y, x + MiB);
  EXPECT_EQ(pool.stats().device_mallocs, 4u);
  pool.free(x);
  pool.free(y);
  pool.release_cached();  // and the arena's size is forgotten: another kind of batch sizes its own
  EXPECT_EQ(pool.stats().held_bytes, 0u);
  pool.alloc(MiB);
  EXPECT_EQ(pool.stats().held_bytes, MiB);
}

TEST(ActivationPool, WhollyFreeSegmentsGoBackBeforeALargerOneIsMade) {
  ZERO_SKIP_WITHOUT_CUDA();
  ActivationPool pool;
  pool.alloc(MiB);  // in use throughout
  void* x = pool.alloc(4 * MiB);
  void* y = pool.alloc(4 * MiB);
  pool.free(x);
  pool.free(y);  // 8 MiB free in two segments, no block of 6
  pool.alloc(6 * MiB);
  EXPECT_EQ(pool.stats().segments_released, 2u);
  EXPECT_EQ(pool.stats().held_bytes, 7 * MiB);
  EXPECT_EQ(pool.stats().device_mallocs, 4u);
}

// A micro-batch of T tokens: the activations of a small decoder, T x width bytes each, some kept to the end
// of the micro-batch (as the forward keeps them for the backward), the rest freed in between.
TEST(ActivationPool, ChangingTokenCountsStayNearThePeakAndBlocksNeverOverlap) {
  ZERO_SKIP_WITHOUT_CUDA();
  ActivationPool pool;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tokens(64, 1024);
  const std::vector<size_t> widths = {8192, 2048, 24576, 2048, 8192, 4096};  // bytes per token
  std::map<char*, std::pair<size_t, uint8_t>> live;  // block -> its bytes, the byte it was filled with
  size_t peak_live = 0, live_bytes = 0, largest_batch = 0, mallocs_before_last_largest = 0;
  int fill = 0;
  auto take = [&](size_t bytes) {
    char* p = static_cast<char*>(pool.alloc(bytes));
    for (auto& [q, v] : live) {
      ASSERT_TRUE(p + bytes <= q || q + v.first <= p) << "a block of " << bytes << " overlaps a live one";
    }
    const uint8_t byte = uint8_t(++fill);
    CUDA_CHECK(cudaMemset(p, byte, bytes));
    live[p] = {bytes, byte};
    live_bytes += bytes;
    peak_live = std::max(peak_live, live_bytes);
  };
  auto give = [&](char* p) {
    const auto [bytes, byte] = live.at(p);
    uint8_t first = 0, last = 0;  // what the block holds at both ends: its own fill, no one else's
    CUDA_CHECK(cudaMemcpy(&first, p, 1, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&last, p + bytes - 1, 1, cudaMemcpyDeviceToHost));
    ASSERT_EQ(first, byte);
    ASSERT_EQ(last, byte);
    pool.free(p);
    live.erase(p);
    live_bytes -= bytes;
  };
  for (int batch = 0; batch < 60; ++batch) {
    const size_t T = size_t(tokens(rng));
    if (T > largest_batch) {
      largest_batch = T;
      mallocs_before_last_largest = pool.stats().device_mallocs;
    }
    std::vector<char*> kept;
    for (int layer = 0; layer < 4; ++layer) {
      for (size_t w : widths) take(T * w);
      // The layer's temporaries go, its output (the last taken) stays for the backward.
      std::vector<char*> layer_blocks;
      for (auto& [p, v] : live) {
        if (std::find(kept.begin(), kept.end(), p) == kept.end()) layer_blocks.push_back(p);
      }
      char* newest = nullptr;
      int newest_fill = -1;
      for (char* p : layer_blocks) {
        if (live[p].second > newest_fill) newest = p, newest_fill = live[p].second;
      }
      for (char* p : layer_blocks) {
        if (p != newest) give(p);
      }
      kept.push_back(newest);
    }
    for (char* p : kept) give(p);
    ASSERT_TRUE(live.empty());
  }
  const PoolStats& s = pool.stats();
  printf("60 micro-batches of 64-1024 tokens: peak in use %.1f MiB, held %.1f MiB, %zu cudaMalloc, %zu segments "
         "given back\n", double(s.peak_in_use_bytes) / MiB, double(s.held_bytes) / MiB, s.device_mallocs,
         s.segments_released);
  // In use is counted in blocks (2 MiB steps): at least the requests' peak.
  EXPECT_GE(s.peak_in_use_bytes, peak_live);
  // The cache holds about one batch's worth: at most its peak in use and a quarter more (exact size classes
  // held 10 times that here).
  EXPECT_LE(s.held_bytes, s.peak_in_use_bytes + s.peak_in_use_bytes / 4);
  // After the largest batch was first seen, every later one fit in what was cut for it.
  EXPECT_LE(s.device_mallocs - mallocs_before_last_largest, 4 * widths.size());
}

}  // namespace
}  // namespace zero::model::cuda_pool
