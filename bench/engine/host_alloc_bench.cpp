// Host buffers on transparent huge pages (core/memory.h) against the allocator they replaced, in the same run:
// the time to allocate and zero a rank's state (the first touch: page faults) and to sweep it afterwards (an
// add over two buffers, as the gradient accumulate and AdamW sweep theirs: TLB misses). The baseline is the old
// HostAllocator, written out here: aligned_alloc(64) and memset, on whatever pages the kernel gives.
//   host_alloc_bench [--mib-total 1024] [--mib-each 64] [--rounds 3]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/memory.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  double alloc_s, sweep_s;
};

// Allocates and zeroes `count` buffers of `each` bytes through alloc/free, then adds each odd buffer into the
// even one before it, twice (the second pass: resident memory, what a step sees).
template <class Alloc, class Free>
Timing run(size_t count, size_t each, Alloc alloc, Free release) {
  std::vector<float*> bufs(count);
  const double t0 = now_s();
  for (size_t i = 0; i < count; ++i) bufs[i] = static_cast<float*>(alloc(each));
  const double t1 = now_s();
  const size_t n = each / sizeof(float);
  double t2 = 0;
  for (int pass = 0; pass < 2; ++pass) {
    t2 = now_s();
    for (size_t i = 0; i + 1 < count; i += 2) {
      float* a = bufs[i];
      const float* b = bufs[i + 1];
      for (size_t k = 0; k < n; ++k) a[k] += b[k] + 1.0f;
    }
  }
  const double t3 = now_s();
  volatile float sink = bufs[0][n - 1];
  (void)sink;
  for (float* p : bufs) release(p, each);
  return {t1 - t0, t3 - t2};
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  return line.empty() ? "unknown" : line;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib_total = 1024, mib_each = 64;
  int rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--mib-total") mib_total = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--mib-each") mib_each = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--rounds") rounds = std::atoi(argv[i + 1]);
    else return std::fprintf(stderr, "unknown option %s\n", k.c_str()), 2;
  }
  const size_t each = mib_each << 20, count = mib_total / mib_each;
  auto raw = zero::make_host_allocator();
  auto old_alloc = [](size_t bytes) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) std::abort();
    std::memset(p, 0, bytes);
    return p;
  };
  auto old_free = [](void* p, size_t) { std::free(p); };
  auto new_alloc = [&](size_t bytes) { return raw->allocate(bytes); };
  auto new_free = [&](void* p, size_t) { raw->deallocate(p); };

  std::printf("# host buffers: %zu x %zu MiB, THP %s, huge page %zu KiB\n", count, mib_each, thp_mode().c_str(),
              zero::huge_page_bytes() >> 10);
  std::printf("%-6s %12s %12s %12s %12s %10s %10s\n", "round", "old alloc s", "new alloc s", "old sweep s",
              "new sweep s", "alloc x", "sweep x");
  for (int r = 0; r < rounds; ++r) {
    const Timing o = run(count, each, old_alloc, old_free);
    const Timing n = run(count, each, new_alloc, new_free);
    std::printf("%-6d %12.4f %12.4f %12.4f %12.4f %10.2f %10.2f\n", r, o.alloc_s, n.alloc_s, o.sweep_s, n.sweep_s,
                o.alloc_s / n.alloc_s, o.sweep_s / n.sweep_s);
  }
  std::printf("# alloc x, sweep x: the old allocator's time / the huge-page allocator's (above 1: faster)\n");
  return 0;
}
