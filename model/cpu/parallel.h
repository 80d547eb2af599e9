// The CPU backend's threads, with the same bits at any thread count.
//
// Why not Eigen's own threading: its threaded GEMM sizes its depth blocks (kc) by the number of threads
// (computeProductBlockingSizes), so an element's sum over k runs in another order at 1, 2 or 8 threads;
// a run's losses then changed in the last bits with `threads` (tiny_cpu under zero.world_invariant:
// 0.6868300642926611 at 1 thread, 0.6868300658103178 at 2), and a resume on a node with other cores was
// not bit-exact. Here the work is cut into items by its shape alone (never by the thread count), each
// item is computed by one thread with Eigen single-threaded, and the threads only decide who computes
// which item: the bits are the same at any `threads`.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>

namespace zero::model::cpu {

// How a product's result is cut: tiles of at most kProductTile a side (a bigger side cut evenly, which keeps
// Eigen's repacking of each tile's operands a few percent of its work), and a result of fewer than kMinTiles
// such tiles cut further by halving its longer tile side, down to 64, so that a few threads share a product
// such as a small weight's gradient over many tokens. Measured against one Eigen product threaded by Eigen:
// bench/results/cpu_threads_20261201.txt. The cut decides the bits (Eigen's kernels round a tile's edge rows
// and columns their own way): these numbers are part of the math, the same on every machine, and a change
// of them changes a run's last bits as any change of the math does.
inline constexpr int64_t kProductTile = 512;
inline constexpr int64_t kMinTiles = 8;

// A side of n elements cut into `parts` pieces of `size` (a multiple of 8 where cut, the last one shorter).
struct TileSplit {
  int64_t parts = 1, size = 0;
};
inline TileSplit split_side(int64_t n, int64_t max_size = kProductTile) {
  if (n <= max_size) return {1, n};
  const int64_t parts = (n + max_size - 1) / max_size;
  const int64_t size = ((n + parts - 1) / parts + 7) / 8 * 8;
  return {(n + size - 1) / size, size};
}

struct Tiling {
  TileSplit rows, cols;
  int64_t tiles() const { return rows.parts * cols.parts; }
};
inline Tiling tiling(int64_t rows, int64_t cols) {
  Tiling t{split_side(rows), split_side(cols)};
  while (t.tiles() < kMinTiles) {
    if (t.rows.size >= t.cols.size && t.rows.size >= 128)
      t.rows = split_side(rows, t.rows.size / 2);
    else if (t.cols.size >= 128)
      t.cols = split_side(cols, t.cols.size / 2);
    else
      break;
  }
  return t;
}

// Runs item(i) for i in [0, n) on up to `threads` OpenMP threads (in any order: items must not share
// outputs). An exception from an item is rethrown here, once every item has ended.
template <class Item>
void parallel_for(int threads, int64_t n, Item&& item) {
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto run = [&](int64_t i) {
    if (failed.load(std::memory_order_relaxed)) return;
    try {
      item(i);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  [[maybe_unused]] const int t = int(std::min<int64_t>(threads, n));
#ifdef _OPENMP
  if (t > 1) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(t)
    for (int64_t i = 0; i < n; ++i) run(i);
  } else {
    for (int64_t i = 0; i < n; ++i) run(i);
  }
#else
  for (int64_t i = 0; i < n; ++i) run(i);
#endif
  if (error) std::rethrow_exception(error);
}

// Runs rows(r0, r1) over [0, n) in pieces of about kRowsItemElems elements (a whole number of rows of
// `row_elems`, the same at any thread count), on up to `threads` threads: for work whose rows are independent,
// which then has the bits of one loop over all rows.
inline constexpr int64_t kRowsItemElems = 16384;
template <class Rows>
void parallel_rows(int threads, int64_t n, int64_t row_elems, Rows&& rows) {
  const int64_t chunk = std::max<int64_t>(1, kRowsItemElems / std::max<int64_t>(1, row_elems));
  parallel_for(threads, (n + chunk - 1) / chunk, [&](int64_t i) { rows(i * chunk, std::min(n, (i + 1) * chunk)); });
}

// Runs tile(r0, c0, rows, cols) over a rows x cols result cut by tiling(), on up to `threads` threads. Each
// tile computes its block of the result whole (its full sum over the depth).
template <class Tile>
void for_each_tile(int threads, int64_t rows, int64_t cols, Tile&& tile) {
  const Tiling t = tiling(rows, cols);
  const TileSplit r = t.rows, c = t.cols;
  parallel_for(threads, r.parts * c.parts, [&](int64_t i) {
    const int64_t r0 = (i / c.parts) * r.size, c0 = (i % c.parts) * c.size;
    tile(r0, c0, std::min(r.size, rows - r0), std::min(c.size, cols - c0));
  });
}

}  // namespace zero::model::cpu
