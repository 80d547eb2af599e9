// Gradient sums in 64-bit fixed point (zero.world_invariant): an int64 counts units of 2^-32, so adding
// terms is integer addition, exact and the same in any order. The step's gradient is then the same bits
// however its micro-batches were spread over ranks and micro-steps, and however the collectives grouped
// them: a run gives the same weights at any world size and stage.
//
// The range is the price. A term (one micro-batch's gradient of its summed loss, one element) must stay
// under kFixedTermLimit = 2^(62 - 32 - 16) = 16384 in magnitude, so that at most kFixedMaxTerms = 2^16 terms
// (micro-batches of one step, over all ranks) sum below 2^62 without overflow. A larger term is counted as
// a bad gradient value (the step is skipped, as for a non-finite one). Resolution: 2^-32 ~ 2.3e-10 a term,
// against fp32's 24 bits relative: a 1e-4 gradient element keeps ~20 bits, a 1e-7 one ~9 (bf16's 8).
//
// The norm of the step's gradient is exact too: the squares of the fixed-point sums (< 2^126 each) are
// added in 192-bit integers (FixedSquareSum), each rank's sum goes over the wire as twelve 16-bit limbs in
// doubles (sums of limbs stay far below 2^53, so the double all-reduce is exact in any order), and the
// total becomes one double by a fixed sequence of roundings.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/math/hd.h"

namespace zero::math {

inline constexpr int kFixedFractionBits = 32;
inline constexpr int64_t kFixedMaxTerms = int64_t(1) << 16;
inline constexpr float kFixedTermLimit = 16384.0f;  // 2^(62 - kFixedFractionBits - 16)
inline constexpr double kFixedOne = 4294967296.0;   // 2^kFixedFractionBits
inline constexpr float kFixedUnit = 0x1p-32f;       // 2^-kFixedFractionBits
static_assert(double(kFixedTermLimit) * kFixedOne * double(kFixedMaxTerms) == 0x1p62, "a step's sum fits in int64");

// x * 2^32 rounded to nearest, ties to even (the product is exact in double). Out-of-range values are
// clamped to +-2^46 (the limit) and NaN becomes 0: no undefined conversion, and a step's sums of clamped
// terms stay inside int64 too. The engine counts such terms and skips the step (it requires its NaN
// guard with fixed-point sums), so a clamped value never reaches the optimizer.
ZERO_HD int64_t to_fixed(float x) {
  constexpr double kMax = double(kFixedTermLimit) * kFixedOne;  // 2^46
  double d = double(x) * kFixedOne;
  if (!(d == d)) return 0;
  d = d > kMax ? kMax : d < -kMax ? -kMax : d;
#if defined(__CUDA_ARCH__)
  return __double2ll_rn(d);
#else
  // Adding 1.5 * 2^52 rounds d to an integer, ties to even (the default rounding mode), and leaves that
  // integer in the low mantissa bits (|d| <= 2^46 < 2^51): the same result as __double2ll_rn, in plain
  // adds and integer subtracts that vectorise (std::nearbyint was a libm call per element).
  const double r = d + 0x1.8p52;
  int64_t bits;
  std::memcpy(&bits, &r, sizeof bits);
  return bits - int64_t(0x4338000000000000);  // the bits of 1.5 * 2^52
#endif
}

// One rounding (int64 to float), then an exact scaling by 2^-32.
ZERO_HD float from_fixed(int64_t q) {
#if defined(__CUDA_ARCH__)
  return __ll2float_rn(q) * kFixedUnit;
#else
  return float(q) * kFixedUnit;
#endif
}

// An exact sum of squares of fixed-point values: 192 bits, words little-endian.
struct FixedSquareSum {
  uint64_t w[3] = {0, 0, 0};

  ZERO_HD void add_square(int64_t q) {
    const uint64_t a = q < 0 ? uint64_t(0) - uint64_t(q) : uint64_t(q);
    const unsigned __int128 sq = (unsigned __int128)a * a;
    add(uint64_t(sq), uint64_t(sq >> 64), 0);
  }
  ZERO_HD void add(const FixedSquareSum& o) { add(o.w[0], o.w[1], o.w[2]); }
  ZERO_HD void add(uint64_t lo, uint64_t mid, uint64_t hi) {
    const unsigned __int128 s0 = (unsigned __int128)w[0] + lo;
    const unsigned __int128 s1 = (unsigned __int128)w[1] + mid + uint64_t(s0 >> 64);
    w[0] = uint64_t(s0);
    w[1] = uint64_t(s1);
    w[2] += hi + uint64_t(s1 >> 64);
  }

  // Twelve 16-bit limbs, lowest first: what a double all-reduce sums exactly.
  static constexpr int kLimbs = 12;
  void to_limbs(double* limbs) const {
    for (int i = 0; i < kLimbs; ++i) limbs[i] = double((w[i / 4] >> (16 * (i % 4))) & 0xffffu);
  }
  // The sum of several ranks' limbs back into one integer (carries propagated), as a double: the value in
  // units of 2^-64 (the square of the fixed-point unit) times 2^-64, so the sum of squares itself.
  static double limbs_to_value(const double* limbs) {
    FixedSquareSum s;
    for (int i = 0; i < kLimbs; ++i) {
      const unsigned __int128 v = (unsigned __int128)uint64_t(limbs[i]) << (16 * (i % 4));
      uint64_t part[3] = {0, 0, 0};
      part[i / 4] = uint64_t(v);
      if (i / 4 < 2) part[i / 4 + 1] = uint64_t(v >> 64);
      s.add(part[0], part[1], part[2]);
    }
    return s.value();
  }
  // The sum of squares of the real values (units of 2^-64), by a fixed sequence of roundings.
  double value() const {
    return ((double(w[2]) * 0x1p64 + double(w[1])) * 0x1p64 + double(w[0])) * 0x1p-64;
  }
};

}  // namespace zero::math
