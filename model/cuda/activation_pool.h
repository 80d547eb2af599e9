// A caching pool of device memory for the model's activations: a freed block is kept and a later request
// reuses it, so a micro-batch whose shapes fit what the pool holds makes no cudaMalloc. Blocks are handed out
// to work on one stream only (the compute stream), so reusing a block right after free is ordered by it.
// - A request (rounded up to 512 bytes) takes the smallest free block that holds it (best fit), split: the
//   rest stays free beside it in its segment (the memory of one cudaMalloc); a freed block merges with its
//   free neighbours.
// - The first segment is the arena. A request no free block holds makes another segment; when nothing is in
//   use any more (the micro-batch has ended) and there is more than one, all go back and the next request
//   makes one arena of their total size: a batch like that one fits in it again whatever its shapes. Token
//   budgets give every micro-batch another token count and so every activation another size: size classes
//   kept a block of every size seen (87.5 GiB in use on the H200 for at most 36.6 GiB of activations:
//   bench/results/gpu_20261128_h200). What the pool holds converges to about the peak in use of its
//   largest batch.
// - A request no free block holds while the free blocks add up to it gives back the segments that are
//   wholly free before it makes a new one.
// - When cudaMalloc fails, the wholly free segments go back and the allocation is tried once more (an arena
//   too large for the device: the request alone) before OutOfMemory is thrown.
// Giving memory back (cudaFree) synchronises the device: only after a batch outgrew the arena. The owner's
// `before_device_sync` runs first (its guarded wait for the stream: a stream held behind a collective of a
// lost peer ends in that guard's error, not a hang in cudaFree).
#pragma once
#include <cstddef>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/check.h"
#include "core/out_of_memory.h"

namespace zero::model::cuda_pool {

// The block size of a request: 512-byte steps (cudaMalloc's 256-byte alignment kept by every split); 0 bytes
// still take one 512-byte block.
size_t block_bytes(size_t bytes);

// Thrown when the device has no memory left for an activation, even after the cache is released.
using zero::OutOfMemory;  // core/out_of_memory.h

struct PoolStats {
  size_t device_mallocs = 0;     // cudaMalloc calls so far
  size_t segments_released = 0;  // segments given back (cudaFree) so far
  size_t held_bytes = 0;         // in use + cached
  size_t in_use_bytes = 0;
  size_t peak_in_use_bytes = 0;
};

class ActivationPool {
 public:
  explicit ActivationPool(std::function<void()> before_device_sync = {});
  ~ActivationPool();
  ActivationPool(const ActivationPool&) = delete;
  ActivationPool& operator=(const ActivationPool&) = delete;

  void* alloc(size_t bytes);  // 256-byte aligned device memory (cudaMalloc's alignment)
  void free(void* p);
  void release_cached();      // cudaFree every wholly free segment (synchronises); the next batch sizes the arena
  const PoolStats& stats() const { return stats_; }

 private:
  // A block: a piece of a segment; prev/next are its neighbours in the segment (null at its ends).
  struct Block {
    char* ptr;
    size_t size;
    Block* prev = nullptr;
    Block* next = nullptr;
    bool free = false;
  };
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };

  void* device_malloc(size_t size);
  void free_block(Block* b);
  void release_free_segments();

  std::function<void()> before_device_sync_;
  std::set<Block*, BySizeThenAddress> free_;
  std::unordered_map<void*, Block*> live_;
  std::unordered_set<Block*> segments_;  // the first block of each segment (its cudaMalloc'd address)
  size_t free_bytes_ = 0;
  size_t arena_bytes_ = 0;  // the next arena's size: what all segments held when the pool last consolidated
  PoolStats stats_;
};

}  // namespace zero::model::cuda_pool
