// The reference both attention test suites (the CPU emulation of the tiled kernels and the CUDA kernels)
// measure against: plain causal GQA attention in fp64 straight from the definitions, one query row at a
// time on the token-major arrays [tokens, heads, d], so it shares neither the tiling nor any kernel code:
//   s_j = q.k_j / sqrt(d) (j <= i), lse = log sum_j exp(s_j), p_j = exp(s_j - lse), o = sum_j p_j v_j;
//   dv_j += p_j dO, dp_j = dO.v_j, ds_j = p_j (dp_j - sum_j' p_j' dp_j'), dq = sum_j ds_j k_j / sqrt(d),
//   dk_j += ds_j q / sqrt(d).
// Plus the inputs (uniform draws from splitmix64) and the per-tensor error ||a - b|| / ||b||.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/splitmix.h"

namespace zero::testing {

inline std::vector<int32_t> cu_seqlens_of(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> cu{0};
  for (int32_t len : lengths) cu.push_back(cu.back() + len);
  return cu;
}

// n draws from [-spread, spread), advancing state.
inline std::vector<float> uniform(int64_t n, float spread, uint64_t& state) {
  std::vector<float> x(static_cast<size_t>(n));
  for (float& e : x) e = spread * (float(splitmix64(state) >> 40) * 0x1p-23f - 1.0f);
  return x;
}

// Relative L2 error of got against want; infinite when the sizes differ or got holds a NaN (an element a
// kernel never wrote fails every bound).
template <class A, class B>
double rel_l2(const std::vector<A>& got, const std::vector<B>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double diff = double(got[i]) - double(want[i]);
    num += diff * diff;
    den += double(want[i]) * double(want[i]);
  }
  if (!std::isfinite(num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct ExactAttention {
  std::vector<double> o, lse, dq, dk, dv;
};

inline ExactAttention exact_attention(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, const std::vector<float>& d_o,
                                      const std::vector<int32_t>& lengths, int64_t hq, int64_t hkv, int64_t d) {
  const auto cu = cu_seqlens_of(lengths);
  const int64_t n = cu.back(), r = hq / hkv;
  const double scale = 1.0 / std::sqrt(double(d));
  auto dot = [d](const float* a, const float* b) {
    double s = 0.0;
    for (int64_t i = 0; i < d; ++i) s += double(a[i]) * double(b[i]);
    return s;
  };
  ExactAttention e;
  e.o.assign(size_t(n * hq * d), 0.0), e.lse.assign(size_t(n * hq), 0.0), e.dq.assign(size_t(n * hq * d), 0.0);
  e.dk.assign(size_t(n * hkv * d), 0.0), e.dv.assign(size_t(n * hkv * d), 0.0);
  std::vector<double> p, dp;
  for (size_t si = 0; si < lengths.size(); ++si) {
    const int64_t start = cu[si], len = lengths[si];
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h / r;
      auto kv = [&](int64_t j) { return ((start + j) * hkv + g) * d; };
      for (int64_t i = 0; i < len; ++i) {
        const int64_t qi = ((start + i) * hq + h) * d;
        p.assign(size_t(i + 1), 0.0), dp.assign(size_t(i + 1), 0.0);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, p[j] = scale * dot(&q[qi], &k[kv(j)]));
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(p[j] - mx);
        const double lse = mx + std::log(sum);
        e.lse[(start + i) * hq + h] = lse;
        double row_dot = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = std::exp(p[j] - lse);
          dp[j] = dot(&d_o[qi], &v[kv(j)]);
          row_dot += p[j] * dp[j];
          for (int64_t x = 0; x < d; ++x) {
            e.o[qi + x] += p[j] * v[kv(j) + x];
            e.dv[kv(j) + x] += p[j] * d_o[qi + x];
          }
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - row_dot) * scale;
          for (int64_t x = 0; x < d; ++x) {
            e.dq[qi + x] += ds * k[kv(j) + x];
            e.dk[kv(j) + x] += ds * q[qi + x];
          }
        }
      }
    }
  }
  return e;
}

// The same for sequences with hidden spans (hidden: begin, end per sequence, or empty; a shared-prompt pair
// [shared | chosen rest | rejected rest] with the chosen rest hidden from the rejected rest), computed without
// any mask: each such sequence is split into the two sequences it stands for, [shared | chosen rest] and
// [shared | rejected rest], those go through exact_attention, and the results are folded back. A shared
// row is one query with one output gradient: the second copy's shared rows get dO = 0 (so they add nothing
// to any gradient), and their o, lse and dq are the first copy's. Every key's dk and dv sum both copies',
// since both answers' queries read the shared keys.
inline ExactAttention exact_attention_hidden(const std::vector<float>& q, const std::vector<float>& k,
                                             const std::vector<float>& v, const std::vector<float>& d_o,
                                             const std::vector<int32_t>& lengths, const std::vector<int32_t>& hidden,
                                             int64_t hq, int64_t hkv, int64_t d) {
  if (hidden.empty()) return exact_attention(q, k, v, d_o, lengths, hq, hkv, d);
  const auto cu = cu_seqlens_of(lengths);
  const int64_t wq = hq * d, wk = hkv * d;
  std::vector<float> uq, uk, uv, udo;
  std::vector<int32_t> ulen;
  std::vector<int64_t> src;  // the shared-layout token of each unshared token
  auto copy_row = [&](int64_t t, bool again = false) {
    uq.insert(uq.end(), q.begin() + t * wq, q.begin() + (t + 1) * wq);
    if (again) {
      udo.insert(udo.end(), size_t(wq), 0.0f);
    } else {
      udo.insert(udo.end(), d_o.begin() + t * wq, d_o.begin() + (t + 1) * wq);
    }
    uk.insert(uk.end(), k.begin() + t * wk, k.begin() + (t + 1) * wk);
    uv.insert(uv.end(), v.begin() + t * wk, v.begin() + (t + 1) * wk);
    src.push_back(t);
  };
  for (size_t s = 0; s < lengths.size(); ++s) {
    const int64_t start = cu[s], len = lengths[s], b = hidden[2 * s], e = hidden[2 * s + 1];
    if (b == e) {
      for (int64_t t = start; t < start + len; ++t) copy_row(t);
      ulen.push_back(int32_t(len));
      continue;
    }
    for (int64_t t = start; t < start + e; ++t) copy_row(t);  // shared + chosen rest
    for (int64_t t = start; t < start + b; ++t) copy_row(t, true);  // shared again + rejected rest
    for (int64_t t = start + e; t < start + len; ++t) copy_row(t);
    ulen.push_back(int32_t(e));
    ulen.push_back(int32_t(b + len - e));
  }
  const ExactAttention u = exact_attention(uq, uk, uv, udo, ulen, hq, hkv, d);
  const int64_t n = cu.back();
  ExactAttention e;
  e.o.assign(size_t(n * wq), 0.0), e.lse.assign(size_t(n * hq), 0.0), e.dq.assign(size_t(n * wq), 0.0);
  e.dk.assign(size_t(n * wk), 0.0), e.dv.assign(size_t(n * wk), 0.0);
  std::vector<bool> seen(size_t(n), false);
  for (size_t ut = 0; ut < src.size(); ++ut) {
    const int64_t t = src[ut];
    for (int64_t x = 0; x < wk; ++x) {
      e.dk[t * wk + x] += u.dk[ut * wk + x];
      e.dv[t * wk + x] += u.dv[ut * wk + x];
    }
    if (seen[size_t(t)]) continue;
    seen[size_t(t)] = true;
    for (int64_t x = 0; x < wq; ++x) e.o[t * wq + x] = u.o[ut * wq + x], e.dq[t * wq + x] = u.dq[ut * wq + x];
    for (int64_t h = 0; h < hq; ++h) e.lse[t * hq + h] = u.lse[ut * hq + h];
  }
  return e;
}

}  // namespace zero::testing
