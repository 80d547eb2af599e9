// RoPE tables and the rotate_half rotation with its transpose.
#include "model/cpu/rope.h"

#include <cmath>

#include "core/math/rope_math.h"
#include "model/cpu/parallel.h"

namespace zero::model::cpu {

RopeTable make_rope_table(std::span<const int32_t> positions, int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  const int64_t n = static_cast<int64_t>(positions.size());
  RopeTable t;
  t.head_dim = head_dim;
  t.cos.resize(half, n);
  t.sin.resize(half, n);
  // HF: inv_freq = 1 / theta ** (arange(0, d, 2).float() / d) in fp32; freqs = inv_freq * position in fp32
  // (an fp32 matmul with one term); cos/sin of that fp32 angle, rounded to fp32.
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    const float expo = float(2 * i) / float(head_dim);
    inv_freq[i] = float(1.0 / std::pow(theta, double(expo)));
  }
  for (int64_t c = 0; c < n; ++c) {
    const float p = float(positions[c]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = inv_freq[i] * p;
      t.cos(i, c) = float(std::cos(double(angle)));
      t.sin(i, c) = float(std::sin(double(angle)));
    }
  }
  return t;
}

namespace {

// The shared rotation of each (x[i], x[i + d/2]) pair (core/math/rope_math.h), or its transpose.
void rotate(float* x, int64_t heads, const RopeTable& t, bool transpose, int threads) {
  const int64_t d = t.head_dim, half = d / 2, n = t.cos.cols();
  parallel_rows(threads, n, heads * d, [&](int64_t tok0, int64_t tok1) {
    for (int64_t tok = tok0; tok < tok1; ++tok) {
      const float* c = t.cos.col(tok).data();
      const float* s = t.sin.col(tok).data();
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + (tok * heads + h) * d;
        for (int64_t i = 0; i < half; ++i) {
          const math::RopePair p{v[i], v[i + half]};
          const math::RopePair r =
              transpose ? math::rope_rotate_transpose(p, c[i], s[i]) : math::rope_rotate(p, c[i], s[i]);
          v[i] = r.a;
          v[i + half] = r.b;
        }
      }
    }
  });
}

}  // namespace

void rope_forward(float* x, int64_t heads, const RopeTable& t, int threads) { rotate(x, heads, t, false, threads); }
void rope_backward(float* dx, int64_t heads, const RopeTable& t, int threads) { rotate(dx, heads, t, true, threads); }

}  // namespace zero::model::cpu
