// Element-wise kernels in 16-byte accesses: V consecutive elements of a tensor as one Pack, loaded and stored by
// one instruction a 16 bytes (one element a thread in 2- or 4-byte loads leaves too few bytes in flight to keep
// HBM busy: SwiGLU so written ran at about 30% of the H200's bandwidth, bench/results/gpu_20261128_h200), and
// the loop that walks a tensor in them whatever its address and length: the elements before every operand's
// next 16-byte boundary (the head) and after the last whole vector (the tail) one by one, the rest V at a
// time. The per-element formulas are the same at every width, so a kernel gives the same bits either way.
// Compiles as host C++ under the SIMT emulator too (ZERO_SIMT_EMULATION), which stops at a misaligned pack as a
// GPU would fault on it ("misaligned address").
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace zero::kernels {

// V elements of T, aligned as one access (up to 16 bytes; a wider pack is moved as several 16-byte ones).
template <typename T, int V>
struct alignas(sizeof(T) * V < 16 ? sizeof(T) * V : 16) Pack {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ Pack<T, V>* pack_at(const void* base, size_t element) {
  T* p = const_cast<T*>(static_cast<const T*>(base)) + element;
#if defined(ZERO_SIMT_EMULATION)
  if constexpr (alignof(Pack<T, V>) == 16) simt::require_16_byte_aligned(p, "vector access");
#endif
  return reinterpret_cast<Pack<T, V>*>(p);
}
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const void* base, size_t element) {
  return *pack_at<T, V>(base, element);
}
template <typename T, int V>
__device__ __forceinline__ void store_pack(void* base, size_t element, const Pack<T, V>& p) {
  *pack_at<T, V>(base, element) = p;
}

// The width of the vectors over operands of types T...: 16 bytes of the narrowest (8 bf16 beside 8 floats,
// which move as two 16-byte accesses).
template <typename... T>
constexpr int vector_width() {
  size_t narrowest = 16;
  for (size_t s : {sizeof(T)...}) narrowest = s < narrowest ? s : narrowest;
  return int(16 / narrowest);
}

// An operand of a vectorised walk: its address and element size.
struct Operand {
  const void* p;
  size_t elem_bytes;
};
// The head: the elements (< width) to take one by one before every operand's next element lies on a 16-byte
// boundary, the same count for all; -1 when there is none (operands misaligned against each other, or fewer
// elements than the head): then the whole walk goes one element at a time.
inline int64_t vector_head(int width, size_t n, std::initializer_list<Operand> operands) {
  for (int h = 0; h < width && size_t(h) <= n; ++h) {
    bool aligned = true;
    for (const Operand& o : operands)
      aligned = aligned && (reinterpret_cast<uintptr_t>(o.p) + h * o.elem_bytes) % 16 == 0;
    if (aligned) return h;
  }
  return -1;
}

// How a kernel walks n elements of `operands`: V elements a step from `head` on where a head aligns them all,
// else one element at a time (width 1, head 0); `steps`: the vectors (or elements) it takes, which size its grid.
struct Walk {
  int width = 1;
  size_t head = 0;
  size_t steps = 0;
};
template <int V>
Walk walk_of(size_t n, std::initializer_list<Operand> operands) {
  const int64_t head = vector_head(V, n, operands);
  if (V == 1 || head < 0) return {1, 0, n};
  return {V, size_t(head), (n + V - 1) / V};
}

// The grid-stride walk of n elements, V at a time from `head` on: f(i, std::integral_constant<int, W>) for
// the W elements from i, W = V for the whole vectors (i = head + V j) and 1 for the head and the tail. With V =
// 1 (head 0) it is the plain one-element loop.
// for_each_vector_in: the same walk by the `blocks` blocks from block `block` of the grid on (several walks in
// one grid, a share of its blocks each).
template <int V, class F>
__device__ __forceinline__ void for_each_vector_in(size_t n, size_t head, size_t block, size_t blocks, F&& f) {
  const size_t first = block * blockDim.x + threadIdx.x, stride = blocks * blockDim.x;
  size_t vectors = 0;
  if constexpr (V > 1) {
    vectors = (n - head) / V;
    for (size_t j = first; j < vectors; j += stride) f(head + j * V, std::integral_constant<int, V>{});
  }
  const size_t singles = n - vectors * V, rest_at = head + vectors * V;  // the head, then the tail
  for (size_t j = first; j < singles; j += stride)
    f(j < head ? j : rest_at + (j - head), std::integral_constant<int, 1>{});
}
template <int V, class F>
__device__ __forceinline__ void for_each_vector(size_t n, size_t head, F&& f) {
  for_each_vector_in<V>(n, head, blockIdx.x, gridDim.x, static_cast<F&&>(f));
}

// The head of a walk over one operand alone: the elements before its next 16-byte boundary (at most n).
template <typename T>
__device__ __forceinline__ size_t own_head(const T* p, size_t n) {
  const size_t h = (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16 / sizeof(T);
  return h < n ? h : n;
}

}  // namespace zero::kernels
