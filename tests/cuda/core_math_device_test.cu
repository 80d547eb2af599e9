// core/math on the device against the same functions on the host, formula by formula: RoPE and the
// RMSNorm row (pure arithmetic through rounding.h) bit for bit, the activations within a few ulp (exp and
// log1p are each side's own libm). The bf16 conversion and the AdamW update are covered through CudaOps in
// cuda_ops_test. Built with the CUDA backend, so nvcc compiles these headers in every build; skips without
// a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/math/activations.h"
#include "core/math/bf16.h"
#include "core/math/rmsnorm_row.h"
#include "core/math/rope_math.h"
#include "core/splitmix.h"
#include "tests/cuda/cuda_test_util.h"

namespace zero {
namespace {

using testing::DeviceBuffer;

// Each case maps `kIns` inputs of one element to `kOuts` outputs, with the same code on both sides.
struct RopeCase {
  static constexpr int kIns = 4, kOuts = 4;  // (a, b, cos, sin) -> rotated (a, b), transposed (a, b)
  ZERO_HD void operator()(const float* in, float* out) const {
    const math::RopePair r = math::rope_rotate({in[0], in[1]}, in[2], in[3]);
    const math::RopePair t = math::rope_rotate_transpose({in[0], in[1]}, in[2], in[3]);
    out[0] = r.a, out[1] = r.b, out[2] = t.a, out[3] = t.b;
  }
};

struct RmsNormRowCase {
  static constexpr int kDim = 64;
  static constexpr int kIns = 3 * kDim, kOuts = 3 * kDim + 1;  // (x, w, dy) -> (y, dx, dw, rstd)
  ZERO_HD void operator()(const float* in, float* out) const {
    const float *x = in, *w = in + kDim, *dy = in + 2 * kDim;
    float *y = out, *dx = out + kDim, *dw = out + 2 * kDim;
    for (int i = 0; i < kDim; ++i) dw[i] = 0.0f;
    const float rstd = math::rmsnorm_row_forward(x, w, kDim, 1e-6f, y);
    math::rmsnorm_row_backward(x, w, rstd, dy, kDim, dx, dw);
    out[3 * kDim] = rstd;
  }
};

template <class T>
struct ActivationsCase {
  static constexpr int kIns = 1, kOuts = 4;
  ZERO_HD void operator()(const T* in, T* out) const {
    out[0] = math::sigmoid(in[0]);
    out[1] = math::silu(in[0]);
    out[2] = math::silu_grad(in[0]);
    out[3] = math::softplus(in[0]);
  }
};

template <class T, class Case>
__global__ void apply_kernel(Case c, const T* in, T* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    c(in + i * Case::kIns, out + i * Case::kOuts);
}

// Runs `Case` on n elements of `in` on the host and on the device; returns (host, device) outputs.
template <class T, class Case>
std::pair<std::vector<T>, std::vector<T>> run_both(const std::vector<T>& in) {
  const size_t n = in.size() / Case::kIns;
  std::vector<T> host(n * Case::kOuts);
  for (size_t i = 0; i < n; ++i) Case{}(in.data() + i * Case::kIns, host.data() + i * Case::kOuts);
  DeviceBuffer d_in(in.size() * sizeof(T)), d_out(host.size() * sizeof(T));
  d_in.upload(in);
  apply_kernel<T><<<int((n + 255) / 256), 256>>>(Case{}, d_in.as<T>(), d_out.as<T>(), n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  return {host, d_out.download<T>(host.size())};
}

float random_unit(uint64_t& state) { return float(int64_t(splitmix64(state) >> 11) - (int64_t(1) << 52)) * 0x1p-52f; }

struct CoreMathDevice : ::testing::Test {
  void SetUp() override {
    ZERO_SKIP_WITHOUT_CUDA();
    CUDA_CHECK(cudaSetDevice(0));
  }
};

TEST_F(CoreMathDevice, RopeBitForBit) {
  uint64_t state = 1;
  std::vector<float> in;
  for (int i = 0; i < 100'000; ++i) {
    const double angle = random_unit(state) * 1e4;
    in.insert(in.end(), {8 * random_unit(state), 8 * random_unit(state), float(std::cos(angle)), float(std::sin(angle))});
  }
  const auto [host, device] = run_both<float, RopeCase>(in);
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_EQ(math::f32_bits(device[i]), math::f32_bits(host[i])) << "output " << i;
}

TEST_F(CoreMathDevice, RmsNormRowBitForBit) {
  uint64_t state = 2;
  std::vector<float> in;
  for (int row = 0; row < 1000; ++row) {
    for (int i = 0; i < RmsNormRowCase::kDim; ++i) in.push_back(3 * random_unit(state));        // x
    for (int i = 0; i < RmsNormRowCase::kDim; ++i) in.push_back(1 + 0.5f * random_unit(state));  // w
    for (int i = 0; i < RmsNormRowCase::kDim; ++i) in.push_back(random_unit(state));            // dy
  }
  const auto [host, device] = run_both<float, RmsNormRowCase>(in);
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_EQ(math::f32_bits(device[i]), math::f32_bits(host[i])) << "output " << i;
}

// Within `ulps` of the host relative to the value, or, for silu's derivative (1 - s cancels, and the
// derivative crosses zero), absolutely in units of (1 + |x|) epsilon.
template <class T>
void expect_activations_close(double ulps) {
  std::vector<T> in;
  for (int i = -80'000; i <= 80'000; ++i) in.push_back(T(i) / T(1000));  // [-80, 80]
  const auto [host, device] = run_both<T, ActivationsCase<T>>(in);
  const char* names[] = {"sigmoid", "silu", "silu_grad", "softplus"};
  const double eps = std::numeric_limits<T>::epsilon();
  for (size_t i = 0; i < in.size(); ++i)
    for (int k = 0; k < 4; ++k) {
      const double h = host[4 * i + k], d = device[4 * i + k];
      const double tol = ulps * eps * (k == 2 ? 1 + std::fabs(double(in[i])) : std::fabs(h));
      ASSERT_LE(std::fabs(d - h), tol) << names[k] << "(" << double(in[i]) << "): host " << h << " device " << d;
    }
}

TEST_F(CoreMathDevice, ActivationsFp32WithinUlps) { expect_activations_close<float>(8); }
TEST_F(CoreMathDevice, ActivationsFp64WithinUlps) { expect_activations_close<double>(8); }

}  // namespace
}  // namespace zero
