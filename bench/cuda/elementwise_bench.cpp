// The engine's element-wise kernels on the GPU (cuda/kernels.cu: the gradient accumulate and its non-finite
// count, the gradient norm's sum of squares, the bf16 cast of the masters, AdamW on an fp32 and on a split master),
// each timed in 16-byte vectors and one element at a time (the same call with one operand moved by an element, so
// no head aligns them: cuda/vector_pack.cuh; a one-operand kernel has no such run) against a device-to-device
// cudaMemcpy of the same bytes, in the same run. Bytes as
// the kernel must move them (each operand read or written once); GB = 1e9; median of --iters calls, each
// timed with events on one stream. Without a GPU it prints a skip line and exits 0.
//   elementwise_bench [--elements N (default 256Mi)] [--iters N (default 10)]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/cuda/event_timing.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "optim/adamw.h"

using namespace zero;
using kernels::Elem;

using zero::bench::median_event_ms;

int main(int argc, char** argv) {
  size_t n = size_t(256) << 20;
  int iters = 10;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--elements") && i + 1 < argc) {
      n = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "elementwise_bench: unknown argument '%s' (usage: [--elements N] [--iters N])\n", argv[i]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("elementwise_bench: no CUDA device, skipped\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  // Every operand one element longer than n: the one-element-at-a-time runs start it at element 1.
  auto alloc = [&](size_t bytes_per_elem) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, (n + 1) * bytes_per_elem));
    CUDA_CHECK(cudaMemset(p, 0, (n + 1) * bytes_per_elem));
    return static_cast<char*>(p);
  };
  char *f32a = alloc(4), *f32b = alloc(4), *f32c = alloc(4), *f32d = alloc(4), *bf16a = alloc(2), *bf16b = alloc(2);
  void* partials = nullptr;
  void* count = nullptr;
  void* sum = nullptr;
  CUDA_CHECK(cudaMalloc(&partials, kernels::kMaxReduceBlocks * 8));  // counters or doubles
  CUDA_CHECK(cudaMalloc(&count, sizeof(unsigned long long)));
  CUDA_CHECK(cudaMalloc(&sum, sizeof(double)));
  const math::AdamWScalars k = optim::adamw_scalars({0.9f, 0.95f, 1e-8f, 0.1f}, 1e-5f, 3, true, 1.0f);
  auto u64 = [](void* p) { return static_cast<unsigned long long*>(p); };
  auto u16 = [](char* p) { return reinterpret_cast<uint16_t*>(p); };
  auto f32 = [](char* p) { return reinterpret_cast<float*>(p); };

  const double copy_ms =
      median_event_ms([&] { CUDA_CHECK(cudaMemcpyAsync(f32a, f32b, n * 4, cudaMemcpyDeviceToDevice, s)); }, iters, s);
  const double copy_gbs = 2.0 * n * 4 / (copy_ms * 1e6);
  std::printf("elementwise_bench on %s: %zu elements, median of %d; baseline cudaMemcpy device to device %.3f ms, "
              "%.0f GB/s (read + write)\n", prop.name, n, iters, copy_ms, copy_gbs);
  std::printf("%-44s %9s %9s %9s %9s %9s %s\n", "kernel", "vec ms", "vec GB/s", "one ms", "one GB/s", "one/vec",
              "vec / memcpy GB/s");
  // e: the element offset (0: vectors; 1 on one operand: one element at a time).
  // A single operand is vectorised past its head at any offset: no one-element run for it.
  struct Case {
    const char* name;
    double bytes_per_elem;
    std::function<void(size_t)> call;
    bool one_at_a_time = true;
  };
  const std::vector<Case> cases = {
      {"add fp32 += bf16 (gradient accumulate)", 10,
       [&](size_t e) { kernels::add(f32a, Elem::F32, bf16a + 2 * e, Elem::BF16, n, s); }},
      {"count_nonfinite bf16 (gradient check)", 2,
       [&](size_t) { kernels::count_nonfinite(bf16a, Elem::BF16, n, 1e30f, u64(partials), u64(count), s); }, false},
      {"sum_squares fp32 (the gradient norm)", 4,
       [&](size_t) {
         kernels::sum_squares(f32a, Elem::F32, n, static_cast<double*>(partials), static_cast<double*>(sum), s);
       },
       false},
      {"copy bf16 <- fp32 (the masters' cast)", 6,
       [&](size_t e) { kernels::copy(bf16a, Elem::BF16, f32a + 4 * e, Elem::F32, n, s); }},
      {"adamw fp32 master, fp32 gradient", 28,
       [&](size_t e) { kernels::adamw(f32(f32a), f32b + 4 * e, Elem::F32, f32(f32c), f32(f32d), n, k, s); }},
      {"adamw_split master, fp32 gradient", 28,
       [&](size_t e) {
         kernels::adamw_split(bf16a, u16(bf16b), f32b + 4 * e, Elem::F32, f32(f32c), f32(f32d), n, k, s);
       }},
  };
  for (const Case& c : cases) {
    const double vec = median_event_ms([&] { c.call(0); }, iters, s);
    const double vec_gbs = c.bytes_per_elem * n / (vec * 1e6);
    if (c.one_at_a_time) {
      const double one = median_event_ms([&] { c.call(1); }, iters, s);
      const double one_gbs = c.bytes_per_elem * n / (one * 1e6);
      std::printf("%-44s %9.3f %9.0f %9.3f %9.0f %9.2f %.2f\n", c.name, vec, vec_gbs, one, one_gbs, one / vec,
                  vec_gbs / copy_gbs);
    } else {
      std::printf("%-44s %9.3f %9.0f %9s %9s %9s %.2f\n", c.name, vec, vec_gbs, "-", "-", "-", vec_gbs / copy_gbs);
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  for (void* p : {static_cast<void*>(f32a), static_cast<void*>(f32b), static_cast<void*>(f32c),
                  static_cast<void*>(f32d), static_cast<void*>(bf16a), static_cast<void*>(bf16b), partials, count, sum})
    CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}
