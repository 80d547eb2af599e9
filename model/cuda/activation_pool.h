// A caching pool of device memory for the model's activations: a freed block goes back to a free list of its
// size class and the next allocation of that class reuses it, so a training step that repeats the last one's
// shapes makes no cudaMalloc (after the first). Blocks are handed out to work on one stream only (the compute
// stream), so reusing a block right after free is ordered by the stream itself. When cudaMalloc fails, the
// cached blocks are released and the allocation is tried once more before OutOfMemory is thrown.
#pragma once
#include <cstddef>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/out_of_memory.h"

namespace zero::model::cuda_pool {

// The size class of a request: 512-byte steps up to 1 MiB, 2 MiB steps above (at most 2 MiB of slack
// per large block; each class keeps its own free list). 0 bytes still take one 512-byte block.
size_t block_bytes(size_t bytes);

// Thrown when the device has no memory left for an activation, even after the cache is released.
using zero::OutOfMemory;  // core/out_of_memory.h

struct PoolStats {
  size_t device_mallocs = 0;  // cudaMalloc calls so far
  size_t held_bytes = 0;      // in use + cached
  size_t in_use_bytes = 0;
  size_t peak_in_use_bytes = 0;
};

class ActivationPool {
 public:
  ActivationPool() = default;
  ~ActivationPool();
  ActivationPool(const ActivationPool&) = delete;
  ActivationPool& operator=(const ActivationPool&) = delete;

  void* alloc(size_t bytes);  // 256-byte aligned device memory (cudaMalloc's alignment)
  void free(void* p);
  void release_cached();      // cudaFree every cached block (synchronises the device)
  const PoolStats& stats() const { return stats_; }

 private:
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
  std::unordered_map<void*, size_t> live_;     // block -> its size class
  PoolStats stats_;
};

}  // namespace zero::model::cuda_pool
