// HF-like deterministic initialisation.
#include "model/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>

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

void fill_normal(std::span<float> out, double mean, double stddev, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < out.size(); i += 2) {
    // 53-bit uniforms in (0, 1]: u1 never 0, so log(u1) is finite.
    const double u1 = (double(splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = double(splitmix64(s) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = float(mean + stddev * r * std::cos(2.0 * std::numbers::pi * u2));
    if (i + 1 < out.size()) out[i + 1] = float(mean + stddev * r * std::sin(2.0 * std::numbers::pi * u2));
  }
}

void init_tensor(const TensorSpec& spec, const Qwen3Config& c, uint64_t seed, std::span<float> out) {
  ZERO_CHECK(int64_t(out.size()) == spec.numel(), "init of {}: {} elements, want {}", spec.name, out.size(),
             spec.numel());
  if (is_norm(spec.name)) {
    std::fill(out.begin(), out.end(), 1.0f);
    return;
  }
  fill_normal(out, 0.0, c.initializer_range, seed ^ fnv1a(spec.name));
  if (spec.name == "model.embed_tokens.weight" && c.pad_token_id >= 0) {
    const int64_t H = c.hidden_size;
    std::fill_n(out.begin() + c.pad_token_id * H, H, 0.0f);
  }
}

void init_random(DenseParams& params, const Qwen3Config& c, uint64_t seed) {
  for (int g = 0; g < params.num_groups(); ++g) {
    const GroupSpec& gs = params.groups()[g];
    for (int t = 0; t < int(gs.tensors.size()); ++t) init_tensor(gs.tensors[t], c, seed, params.param(g, t));
  }
}

}  // namespace zero::model
