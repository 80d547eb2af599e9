#include "core/memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>

#include "core/check.h"

namespace zero {

const char* mem_category_name(MemCategory c) {
  static const char* names[] = {"params", "grads", "master", "optim_m", "optim_v",
                                "comm_buffers", "gathered", "activations", "other"};
  return names[static_cast<size_t>(c)];
}

namespace {
class HostAllocator final : public RawAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = host_pages_allocate(bytes);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);  // engine buffers start zeroed (padding must be zero)
    return p;
  }
  void deallocate(void* p) override { host_pages_free(p); }
};

size_t read_huge_page_bytes() {
  size_t bytes = 0;
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  // Powers of two from 64 KiB (arm64 with 4 KiB pages: 2 MiB; with 64 KiB pages: 512 MiB) are believed;
  // anything else, or no such file, falls back to x86-64's 2 MiB.
  if (f >> bytes && bytes >= (size_t(64) << 10) && (bytes & (bytes - 1)) == 0) return bytes;
  return size_t(2) << 20;
}
}  // namespace

size_t huge_page_bytes() {
  static const size_t bytes = read_huge_page_bytes();
  return bytes;
}

void* host_pages_allocate(size_t bytes) {
  // 64-byte alignment: cache lines and AVX-512 loads. A buffer of a huge page or more starts on one, and its
  // whole huge pages are advised onto them; the tail stays on small pages: a huge page shared with a neighbour
  // would be faulted whole, resident memory the buffer never asked for. The advice fails harmlessly (THP off
  // or "never"): the buffer is then on small pages, which is all it costs.
  const size_t huge = huge_page_bytes();
  const bool large = bytes >= huge;
  void* p = nullptr;
  if (posix_memalign(&p, large ? huge : 64, std::max<size_t>(bytes, 1)) != 0) return nullptr;
  if (large) (void)madvise(p, bytes / huge * huge, MADV_HUGEPAGE);
  return p;
}

void host_pages_free(void* p) { std::free(p); }

std::unique_ptr<RawAllocator> make_host_allocator() { return std::make_unique<HostAllocator>(); }

MemoryStats operator+(const MemoryStats& a, const MemoryStats& b) {
  MemoryStats s;
  for (size_t i = 0; i < kMemCategories; ++i) s.live[i] = a.live[i] + b.live[i], s.peak[i] = a.peak[i] + b.peak[i];
  s.live_total = a.live_total + b.live_total;
  s.peak_total = a.peak_total + b.peak_total;
  return s;
}

TrackingAllocator::TrackingAllocator(std::unique_ptr<RawAllocator> raw) : raw_(std::move(raw)) {}

void* TrackingAllocator::allocate(size_t bytes, MemCategory cat) {
  if (bytes == 0) return nullptr;
  void* p = raw_->allocate(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = static_cast<size_t>(cat);
  s_.live[i] += bytes;
  s_.live_total += bytes;
  if (s_.live[i] > s_.peak[i]) s_.peak[i] = s_.live[i];
  if (s_.live_total > s_.peak_total) s_.peak_total = s_.live_total;
  return p;
}

void TrackingAllocator::deallocate(void* p, size_t bytes, MemCategory cat) {
  if (!p) return;
  raw_->deallocate(p);
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = static_cast<size_t>(cat);
  ZERO_CHECK(s_.live[i] >= bytes, "freeing {} bytes of {} with only {} live", bytes, mem_category_name(cat), s_.live[i]);
  s_.live[i] -= bytes;
  s_.live_total -= bytes;
}

MemoryStats TrackingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_;
}

void TrackingAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  s_.peak = s_.live;
  s_.peak_total = s_.live_total;
}

Buffer::Buffer(TrackingAllocator& alloc, size_t count, DType dtype, MemCategory cat)
    : alloc_(&alloc), count_(count), dtype_(dtype), cat_(cat) {
  data_ = alloc.allocate(bytes(), cat);
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    alloc_ = o.alloc_; data_ = o.data_; count_ = o.count_; dtype_ = o.dtype_; cat_ = o.cat_;
    o.alloc_ = nullptr; o.data_ = nullptr; o.count_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (data_) alloc_->deallocate(data_, bytes(), cat_);
  data_ = nullptr;
  count_ = 0;
}

}  // namespace zero
