// Element-wise host work split over threads: fn(lo, hi) over [0, n) in up to `threads` contiguous parts at
// once. For work whose elements are independent (AdamW, a cast, an add), which then gives the same bits however
// it is split; a reduction must not use it. Parts of at least 64 Ki elements, so small ranges stay on the
// calling thread; threads are started per call (a few tens of microseconds each), which such parts repay.
#pragma once
#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace zero {

inline constexpr size_t kMinParallelPart = size_t(1) << 16;

template <class F>
void parallel_parts(size_t n, int threads, F&& fn) {
  const size_t T = std::min<size_t>(size_t(std::max(threads, 1)), std::max<size_t>(1, n / kMinParallelPart));
  if (T <= 1) {
    fn(size_t(0), n);
    return;
  }
  std::vector<std::thread> workers;
  for (size_t i = 1; i < T; ++i) workers.emplace_back([&fn, n, i, T] { fn(n * i / T, n * (i + 1) / T); });
  fn(size_t(0), n / T);
  for (std::thread& w : workers) w.join();
}

}  // namespace zero
