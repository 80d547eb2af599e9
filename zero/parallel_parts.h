// Element-wise host work split over threads: fn(lo, hi) over [0, n) in up to `threads` contiguous parts at
// once. For work whose elements are independent (AdamW, a cast, an add), which then gives the same bits however
// it is split; a reduction only where its parts are cut by the data alone (blocks of a fixed size, each part's
// blocks summed apart and the sums added in block order) or its sum is exact in any order (integers). Parts of at least 64 Ki elements, so small ranges stay on the
// calling thread. fn must not throw (an exception leaving a thread ends the process): check before.
//
// The threads are OpenMP's, the pool the CPU backend's model math runs on (model/cpu/parallel.h): after a
// parallel region its workers spin a while before they sleep, so threads of our own started beside them
// fought them for the rank's cores. At 2 threads on 2 cores, grad_buckets of a 90M-parameter step took 0.117 s
// on std::threads against 0.050 s on one thread, and 0.042 s with the spinning turned off
// (bench/results/cpu_threads_20261201c.txt). Built without OpenMP, std::threads started per call.
#pragma once
#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace zero {

inline constexpr size_t kMinParallelPart = size_t(1) << 16;

// min_part: the fewest items a part takes (kMinParallelPart elements; 1 where each item is a block of work).
template <class F>
void parallel_parts(size_t n, int threads, F&& fn, size_t min_part = kMinParallelPart) {
  const size_t T = std::min<size_t>(size_t(std::max(threads, 1)), std::max<size_t>(1, n / std::max<size_t>(min_part, 1)));
  if (T <= 1) {
    fn(size_t(0), n);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads(int(T))
  for (size_t i = 0; i < T; ++i) fn(n * i / T, n * (i + 1) / T);
#else
  std::vector<std::thread> workers;
  for (size_t i = 1; i < T; ++i) workers.emplace_back([&fn, n, i, T] { fn(n * i / T, n * (i + 1) / T); });
  fn(size_t(0), n / T);
  for (std::thread& w : workers) w.join();
#endif
}

}  // namespace zero
