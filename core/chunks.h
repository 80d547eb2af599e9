// [0, n) walked in consecutive chunks of at most `chunk` elements: the one loop behind every "a piece at a
// time" in the tree (model init and HF import pieces, a checkpoint's streamed rank file, a resharded load's
// spans), so the bounds arithmetic lives once.
#pragma once
#include <algorithm>
#include <cstddef>

namespace zero {

// Elements [first, first + count) of something larger: the part of a tensor a rank keeps
// (Engine::kept_tensor_range), and so the part an init or an import has to make.
struct ElementRange {
  size_t first = 0, count = 0;
};

// fn(first, count) for each chunk, in order: first = 0, chunk, 2 * chunk, ...; count = min(chunk, n - first).
// chunk must be at least 1; n = 0 calls nothing.
template <class F>
void for_each_chunk(size_t n, size_t chunk, F&& fn) {
  for (size_t first = 0; first < n; first += chunk) fn(first, std::min(chunk, n - first));
}

}  // namespace zero
