// One tracking allocator for every engine buffer, so tests and reports read what is really held
// (live and peak bytes per category), not what the code believes it holds.
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <mutex>

#include "core/dtype.h"

namespace zero {

enum class MemCategory : uint8_t {
  Params,      // compute-dtype parameters (full at stages 0-2, the shard at stage 3)
  Grads,       // gradient accumulator (full at stages 0-1, the shard at stages 2-3)
  Master,      // fp32 master weights
  OptimM,      // AdamW first moment
  OptimV,      // AdamW second moment
  CommBuffers, // gradient views and reduction staging buffers (per bucket)
  Gathered,    // stage 3: all-gathered parameter groups in use or prefetched
  Activations, // model activations and scratch
  Other,
  Count
};
constexpr size_t kMemCategories = static_cast<size_t>(MemCategory::Count);
const char* mem_category_name(MemCategory c);

// Where bytes come from: host memory (CPU backend) or device memory (CUDA backend).
class RawAllocator {
 public:
  virtual ~RawAllocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p) = 0;
};
std::unique_ptr<RawAllocator> make_host_allocator();

struct MemoryStats {
  std::array<size_t, kMemCategories> live{};
  std::array<size_t, kMemCategories> peak{};  // peak of each category on its own
  size_t live_total = 0;
  size_t peak_total = 0;                      // peak of the sum (not the sum of peaks)
  size_t live_of(MemCategory c) const { return live[static_cast<size_t>(c)]; }
  size_t peak_of(MemCategory c) const { return peak[static_cast<size_t>(c)]; }
};

// Two allocators' accounts as one (live and per-category peaks add; peak_total is the sum of their peaks,
// an upper bound of the sum's).
MemoryStats operator+(const MemoryStats& a, const MemoryStats& b);

class TrackingAllocator {
 public:
  explicit TrackingAllocator(std::unique_ptr<RawAllocator> raw);
  void* allocate(size_t bytes, MemCategory cat);
  void deallocate(void* p, size_t bytes, MemCategory cat);
  MemoryStats stats() const;
  void reset_peaks();  // peaks restart from the current live bytes

 private:
  std::unique_ptr<RawAllocator> raw_;
  mutable std::mutex mu_;
  MemoryStats s_;
};

// A typed, move-only buffer owned through the tracking allocator.
class Buffer {
 public:
  Buffer() = default;
  Buffer(TrackingAllocator& alloc, size_t count, DType dtype, MemCategory cat);
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void reset();
  void* data() const { return data_; }
  template <class T> T* as() const { return static_cast<T*>(data_); }
  size_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return count_ * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr; }
  // Address of element i (typed by the buffer's dtype).
  void* at(size_t i) const { return static_cast<char*>(data_) + i * dtype_size(dtype_); }

 private:
  TrackingAllocator* alloc_ = nullptr;
  void* data_ = nullptr;
  size_t count_ = 0;
  DType dtype_ = DType::F32;
  MemCategory cat_ = MemCategory::Other;
};

}  // namespace zero
