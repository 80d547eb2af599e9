// HF-like deterministic initialisation.
#include "model/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/splitmix.h"

namespace zero::model {

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_norm(const std::string& name) {
  return ends_with(name, "layernorm.weight") || ends_with(name, "_norm.weight") || name == "model.norm.weight";
}

}  // namespace

namespace {

// Pairs from element `begin` (even) of the stream to `end`; out[i - first] holds stream element i.
void fill_normal_range(std::span<float> out, size_t first, size_t begin, size_t end, double mean, double stddev,
                       uint64_t seed) {
  uint64_t s = seed + uint64_t(begin) * kSplitmixGamma;  // the state after `begin` calls
  for (size_t i = begin; i < end; i += 2) {
    // 53-bit uniforms in (0, 1]: u1 never 0, so log(u1) is finite.
    const double u1 = (double(splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = double(splitmix64(s) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i - first] = float(mean + stddev * r * std::cos(2.0 * std::numbers::pi * u2));
    if (i + 1 < end) out[i + 1 - first] = float(mean + stddev * r * std::sin(2.0 * std::numbers::pi * u2));
  }
}

}  // namespace

void fill_normal(std::span<float> out, double mean, double stddev, uint64_t seed, int threads, size_t first) {
  ZERO_CHECK(first % 2 == 0, "fill_normal: the stream is drawn in pairs; element {} starts none", first);
  constexpr size_t kMinPiece = size_t(1) << 20;  // below this a thread costs more than it saves
  const size_t n = out.size(), end = first + n;
  const size_t pieces = std::clamp<size_t>(n / kMinPiece, 1, size_t(std::max(threads, 1)));
  if (pieces == 1) return fill_normal_range(out, first, first, end, mean, stddev, seed);
  const size_t step = (n / pieces + 1) / 2 * 2;  // even: every piece starts on a pair
  std::vector<std::thread> workers;
  for (size_t b = first + step; b < end; b += step)
    workers.emplace_back(fill_normal_range, out, first, b, std::min(end, b + step), mean, stddev, seed);
  fill_normal_range(out, first, first, std::min(end, first + step), mean, stddev, seed);
  for (std::thread& w : workers) w.join();
}

void init_tensor(const TensorSpec& spec, const Qwen3Config& c, uint64_t seed, std::span<float> out, int threads) {
  ZERO_CHECK(int64_t(out.size()) == spec.numel(), "init of {}: {} elements, want {}", spec.name, out.size(),
             spec.numel());
  init_tensor_range(spec, c, seed, 0, out, threads);
}

void init_tensor_range(const TensorSpec& spec, const Qwen3Config& c, uint64_t seed, size_t first, std::span<float> out,
                       int threads) {
  ZERO_CHECK(int64_t(first + out.size()) <= spec.numel(), "init of {}: elements [{}, {}) of {}", spec.name, first,
             first + out.size(), spec.numel());
  if (is_norm(spec.name)) {
    std::fill(out.begin(), out.end(), 1.0f);
    return;
  }
  fill_normal(out, 0.0, c.initializer_range, seed ^ fnv1a(spec.name), threads, first);
  if (spec.name == "model.embed_tokens.weight" && c.pad_token_id >= 0) {  // the pad row, where it meets the range
    const size_t H = size_t(c.hidden_size), row0 = size_t(c.pad_token_id) * H;
    const size_t lo = std::max(row0, first), hi = std::min(row0 + H, first + out.size());
    if (lo < hi) std::fill(out.begin() + (lo - first), out.begin() + (hi - first), 0.0f);
  }
}

void init_random(DenseParams& params, const Qwen3Config& c, uint64_t seed, int threads) {
  for (int g = 0; g < params.num_groups(); ++g) {
    const GroupSpec& gs = params.groups()[g];
    for (int t = 0; t < int(gs.tensors.size()); ++t) init_tensor(gs.tensors[t], c, seed, params.param(g, t), threads);
  }
}

}  // namespace zero::model
