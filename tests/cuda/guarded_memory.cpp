#include "tests/cuda/guarded_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

namespace zero::simt {
namespace {

constexpr unsigned char kCanary = 0xA5;
constexpr unsigned char kFresh = 0xFF;

size_t page_bytes() {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

GuardedBuffer::GuardedBuffer(size_t bytes, size_t align) : bytes_(bytes) {
  const size_t page = page_bytes();
  const size_t rounded = bytes == 0 ? align : (bytes + align - 1) / align * align;
  const size_t pages = (rounded + page - 1) / page * page;
  void* m = mmap(nullptr, pages + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return;
  map_ = static_cast<char*>(m);
  map_bytes_ = pages + 2 * page;
  char* first = map_ + page;
  if (mprotect(first, pages, PROT_READ | PROT_WRITE) != 0) {
    munmap(map_, map_bytes_);
    map_ = nullptr;
    return;
  }
  begin_ = first + pages - rounded;
  std::memset(first, kCanary, size_t(begin_ - first));
  std::memset(begin_, kFresh, bytes);
  std::memset(begin_ + bytes, kCanary, rounded - bytes);
}

GuardedBuffer::GuardedBuffer(GuardedBuffer&& o) noexcept { *this = std::move(o); }

GuardedBuffer& GuardedBuffer::operator=(GuardedBuffer&& o) noexcept {
  std::swap(map_, o.map_);
  std::swap(map_bytes_, o.map_bytes_);
  std::swap(begin_, o.begin_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

GuardedBuffer::~GuardedBuffer() {
  if (map_) munmap(map_, map_bytes_);
}

std::ptrdiff_t GuardedBuffer::first_overwritten(bool* found) const {
  *found = false;
  if (!map_) return 0;
  const char* first = map_ + page_bytes();
  const char* end = map_ + map_bytes_ - page_bytes();
  for (const char* c = first; c < end; ++c) {
    if (c == begin_) c += bytes_;
    if (c < end && static_cast<unsigned char>(*c) != kCanary) {
      *found = true;
      return c - begin_;
    }
  }
  return 0;
}

}  // namespace zero::simt
