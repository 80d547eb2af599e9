// One tracking allocator for every engine buffer, so tests and reports read what is really held
// (live and peak bytes per category), not what the code believes it holds.
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

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
// Host memory for engine buffers: host_pages_allocate's, zeroed.
std::unique_ptr<RawAllocator> make_host_allocator();

// Host bytes, 64-byte aligned, not zeroed; nullptr when out of memory; freed with host_pages_free. A block of
// huge_page_bytes() or more starts on a huge-page boundary and its whole huge pages are advised onto transparent
// huge pages (madvise MADV_HUGEPAGE, which the kernel's usual THP mode, "madvise", waits for). Why: a rank's
// first touch of its parameters, gradients and optimizer state faults 4 KiB at a time otherwise, 262,144 faults
// a GiB, most of a short run's start-up on a virtual machine (bench/engine/host_alloc_bench.cpp), and a step's
// sweeps over them miss the TLB less.
void* host_pages_allocate(size_t bytes);
void host_pages_free(void* p);
// The transparent huge page size (/sys/kernel/mm/transparent_hugepage/hpage_pmd_size; 2 MiB where absent).
size_t huge_page_bytes();

// A std allocator on host_pages_allocate: for the large host vectors outside the engine's buffers (a model's
// dense parameters, an initialisation piece), whose first touch would otherwise fault 4 KiB at a time.
template <class T>
struct HostPagesAllocator {
  using value_type = T;
  HostPagesAllocator() = default;
  template <class U> HostPagesAllocator(const HostPagesAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_alloc();
    void* p = host_pages_allocate(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { host_pages_free(p); }
  template <class U> bool operator==(const HostPagesAllocator<U>&) const { return true; }
};
template <class T> using HostVector = std::vector<T, HostPagesAllocator<T>>;

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
