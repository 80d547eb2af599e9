// Memory for the host emulation of a device (simt_emulator.h's shared memory, emulated/fake_cudart.cpp's
// device and pinned buffers) laid out so that running past a buffer is caught where a GPU would let it
// pass: the buffer ends where an inaccessible page begins and starts on the page after another, so an
// access beyond its rounded size faults at the access. The bytes of its own pages outside it (the rounding
// after it, the rest of the first page before it) hold a canary, which catches a write that stays inside
// them when the owner checks (first_overwritten). The buffer starts as all 0xFF bytes: NaN in fp32, bf16
// and fp64, -1 in integers, so a read of memory nothing wrote shows in the results.
#pragma once

#include <cstddef>

namespace zero::simt {

class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  // `bytes` at an `align`-byte boundary (a power of two up to a page); data() is nullptr when the host has
  // no memory left.
  GuardedBuffer(size_t bytes, size_t align);
  GuardedBuffer(GuardedBuffer&& o) noexcept;
  GuardedBuffer& operator=(GuardedBuffer&& o) noexcept;
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer();

  char* data() const { return begin_; }
  size_t size() const { return bytes_; }
  // The offset from data() of the first canary byte that no longer holds the canary, or 0 with *found
  // false when none was overwritten.
  std::ptrdiff_t first_overwritten(bool* found) const;

 private:
  char* map_ = nullptr;  // guard page, the buffer's pages, guard page
  size_t map_bytes_ = 0;
  char* begin_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace zero::simt
