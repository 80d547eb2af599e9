// core/memory.h's host pages, checked against the kernel's own account of this process (/proc/self/smaps): a
// block of a huge page or more starts on a huge-page boundary, its whole huge pages carry the MADV_HUGEPAGE
// flag ("hg" in VmFlags) and its tail does not; engine buffers come back zeroed even where freed memory was
// dirty; HostVector lays its elements out the same way.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/memory.h"

namespace {

using zero::huge_page_bytes;

// The VmFlags of the mapping that holds address a, or "" when no mapping does.
std::string vm_flags_at(const void* a) {
  const auto addr = reinterpret_cast<uintptr_t>(a);
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    // A mapping's first line: "lo-hi perms offset dev inode path"; its fields lines are "Name: value".
    if (line.find(':') > line.find(' ') && (head >> std::hex >> lo >> dash >> hi) && dash == '-') {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line.substr(8) + " ";
  }
  return "";
}

bool thp_in_kernel() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  return f.good();
}

TEST(HostPages, HugePageSizeIsAPowerOfTwo) {
  const size_t h = huge_page_bytes();
  EXPECT_GE(h, size_t(64) << 10);
  EXPECT_EQ(h & (h - 1), 0u);
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  size_t kernel = 0;
  if (f >> kernel) {
    EXPECT_EQ(h, kernel);
  }
}

TEST(HostPages, LargeBlocksAreAdvisedWholeHugePagesOnly) {
  if (!thp_in_kernel()) GTEST_SKIP() << "no transparent huge pages in this kernel";
  const size_t h = huge_page_bytes();
  const size_t bytes = 2 * h + h / 2 + 100;  // two whole huge pages and a tail
  char* p = static_cast<char*>(zero::host_pages_allocate(bytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % h, 0u) << "a large block starts on a huge page";
  std::memset(p, 1, bytes);
  EXPECT_NE(vm_flags_at(p).find(" hg "), std::string::npos) << "first huge page: " << vm_flags_at(p);
  EXPECT_NE(vm_flags_at(p + 2 * h - 1).find(" hg "), std::string::npos) << "second huge page";
  // The tail shares its huge page with whatever follows: advising it would fault that page whole.
  EXPECT_EQ(vm_flags_at(p + 2 * h).find(" hg "), std::string::npos) << "tail: " << vm_flags_at(p + 2 * h);
  zero::host_pages_free(p);
}

TEST(HostPages, SmallBlocksAreCacheLineAligned) {
  for (size_t bytes : {size_t(1), size_t(63), size_t(4096), huge_page_bytes() - 1}) {
    void* p = zero::host_pages_allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xAB, bytes);
    zero::host_pages_free(p);
  }
}

TEST(HostPages, EngineBuffersStartZeroedOverDirtyMemory) {
  auto raw = zero::make_host_allocator();
  for (size_t bytes : {size_t(1000), 3 * huge_page_bytes() + 12}) {
    for (int round = 0; round < 3; ++round) {  // freed dirty, then asked for again: zero every time
      auto* p = static_cast<unsigned char*>(raw->allocate(bytes));
      size_t nonzero = 0;
      for (size_t i = 0; i < bytes; ++i) nonzero += p[i] != 0;
      EXPECT_EQ(nonzero, 0u) << bytes << " bytes, round " << round;
      std::memset(p, 0xFF, bytes);
      raw->deallocate(p);
    }
  }
}

TEST(HostPages, HostVectorIsLaidOutOnHostPages) {
  if (!thp_in_kernel()) GTEST_SKIP() << "no transparent huge pages in this kernel";
  const size_t n = 3 * huge_page_bytes() / sizeof(float);
  zero::HostVector<float> v(n, 0.5f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % huge_page_bytes(), 0u);
  EXPECT_NE(vm_flags_at(v.data()).find(" hg "), std::string::npos);
  EXPECT_EQ(v.front(), 0.5f);
  EXPECT_EQ(v.back(), 0.5f);
  zero::HostVector<float> w = v;  // copies allocate through the same allocator
  EXPECT_TRUE(w == v);
}

}  // namespace
