// splitmix64: the portable, seedable 64-bit generator behind every shuffle and init stream (the
// standard library's distributions differ between implementations; this does not).
#pragma once
#include <cstdint>

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

}  // namespace zero
