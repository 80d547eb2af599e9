// ActivationPool: best fit in split segments, blocks merged when freed, one arena after a batch that
// outgrew it; the one retry after releasing the cache.
#include "model/cuda/activation_pool.h"

#include <cuda_runtime_api.h>

#include "cuda/check.h"

namespace zero::model::cuda_pool {
size_t block_bytes(size_t bytes) {
  constexpr size_t kStep = 512;
  return bytes == 0 ? kStep : (bytes + kStep - 1) / kStep * kStep;
}

ActivationPool::ActivationPool(std::function<void()> before_device_sync)
    : before_device_sync_(std::move(before_device_sync)) {}

ActivationPool::~ActivationPool() {
  for (Block* head : segments_) {  // leaked activations too: the memory goes back all the same
    CUDA_WARN(cudaFree(head->ptr));
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

void* ActivationPool::device_malloc(size_t size) {
  void* p = nullptr;
  cudaError_t rc = cudaMalloc(&p, size);
  if (rc == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the (non-sticky) error before retrying
    release_free_segments();
    rc = cudaMalloc(&p, size);
  }
  if (rc == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory(fmt::format("GPU out of memory: an activation of {} bytes did not fit ({} bytes held by the "
                                  "model's activations, peak {}; {} of {} bytes free on the device)",
                                  size, stats_.held_bytes, stats_.peak_in_use_bytes, free_b, total_b));
  }
  CUDA_CHECK(rc);
  ++stats_.device_mallocs;
  stats_.held_bytes += size;
  return p;
}

void* ActivationPool::alloc(size_t bytes) {
  const size_t size = block_bytes(bytes);
  Block probe{nullptr, size};
  auto it = free_.lower_bound(&probe);  // the smallest free block of at least `size`
  Block* b = nullptr;
  if (it != free_.end()) {
    b = *it;
    free_.erase(it);
    free_bytes_ -= b->size;
  } else {
    // No free block holds it. When the free blocks add up to it, they are pieces cut for other shapes: the
    // wholly free segments go back before a new one is made, or the pool would keep every shape's.
    if (free_bytes_ >= size) release_free_segments();
    // The first segment is the arena: as large as all segments were when the pool last consolidated (when
    // that no longer fits on the device, the request alone).
    size_t bytes = segments_.empty() ? std::max(size, arena_bytes_) : size;
    void* p = nullptr;
    try {
      p = device_malloc(bytes);
    } catch (const OutOfMemory&) {
      if (bytes == size) throw;
      arena_bytes_ = 0;
      bytes = size;
      p = device_malloc(bytes);
    }
    b = new Block{static_cast<char*>(p), bytes};
    segments_.insert(b);
  }
  if (b->size > size) {  // split: the rest (a multiple of 512 bytes) stays free, right after it
    Block* rest = new Block{b->ptr + size, b->size - size, b, b->next, true};
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    free_.insert(rest);
    free_bytes_ += rest->size;
  }
  b->free = false;
  live_.emplace(b->ptr, b);
  stats_.in_use_bytes += b->size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return b->ptr;
}

void ActivationPool::free(void* p) {
  if (!p) return;
  auto it = live_.find(p);
  ZERO_CHECK(it != live_.end(), "activation pool: freeing {} which it did not hand out", p);
  Block* b = it->second;
  live_.erase(it);
  stats_.in_use_bytes -= b->size;
  free_block(b);
  // Nothing in use (a micro-batch has ended) and more than one segment: the batch outgrew the arena. All of
  // them go back, and the next request makes one arena of their size, where a batch like this one fits
  // again whatever its shapes (the pieces of one segment merge back whole).
  if (stats_.in_use_bytes == 0 && segments_.size() > 1) {
    arena_bytes_ = free_bytes_;
    release_free_segments();
  }
}

void ActivationPool::free_block(Block* b) {
  free_bytes_ += b->size;
  // `keep` takes in its successor `gone` (taken out of free_ first: the set is keyed by size).
  auto absorb = [](Block* keep, Block* gone) {
    keep->size += gone->size;
    keep->next = gone->next;
    if (gone->next) gone->next->prev = keep;
    delete gone;
  };
  if (Block* n = b->next; n != nullptr && n->free) {
    free_.erase(n);
    absorb(b, n);
  }
  if (Block* q = b->prev; q != nullptr && q->free) {
    free_.erase(q);
    absorb(q, b);
    b = q;
  }
  b->free = true;
  free_.insert(b);
}

void ActivationPool::release_cached() {
  release_free_segments();
  arena_bytes_ = 0;  // another kind of batch follows (training <-> evaluation): it sizes its own arena
}

void ActivationPool::release_free_segments() {
  bool synced = false;
  for (auto it = free_.begin(); it != free_.end();) {
    Block* b = *it;
    if (b->prev != nullptr || b->next != nullptr) {  // a piece of a segment still partly in use
      ++it;
      continue;
    }
    if (!synced && before_device_sync_) before_device_sync_();
    synced = true;
    CUDA_WARN(cudaFree(b->ptr));
    stats_.held_bytes -= b->size;
    free_bytes_ -= b->size;
    ++stats_.segments_released;
    segments_.erase(b);
    it = free_.erase(it);
    delete b;
  }
}

}  // namespace zero::model::cuda_pool
