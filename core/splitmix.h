// splitmix64: the portable, seedable 64-bit generator behind every shuffle and init stream (the
// standard library's distributions differ between implementations; this does not).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace zero {

// The state advances by this each call: after n calls it is the seed + n * kSplitmixGamma, so a stream can
// be entered at any call.
constexpr uint64_t kSplitmixGamma = 0x9E3779B97F4A7C15ull;

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += kSplitmixGamma);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (Lemire's multiply-and-reject).
inline uint64_t splitmix_below(uint64_t& state, uint64_t bound) {
  __uint128_t m = __uint128_t(splitmix64(state)) * bound;
  uint64_t low = uint64_t(m);
  if (low < bound) {
    const uint64_t threshold = -bound % bound;
    while (low < threshold) {
      m = __uint128_t(splitmix64(state)) * bound;
      low = uint64_t(m);
    }
  }
  return uint64_t(m >> 64);
}

// Fisher-Yates from the back with splitmix_below: the same order on every platform (std::shuffle's is not).
template <class T>
void splitmix_shuffle(std::vector<T>& v, uint64_t state) {
  for (size_t i = v.size(); i-- > 1;) std::swap(v[i], v[splitmix_below(state, uint64_t(i + 1))]);
}

}  // namespace zero
