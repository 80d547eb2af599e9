// Tokens/s of the attention kernels (model/cuda/attention_kernels.h), forward + backward, against eager
// attention measured in the same run: per (sequence, head) the scores materialised as an L x L fp32
// matrix by cuBLAS (S = Q K^T, P V, P^T dO, dO V^T, dS K, dS^T Q: six fp32 SGEMMs, default math mode, no
// TF32), a causal softmax and a softmax-gradient kernel between them. Qwen3-4B's attention shape: 32
// query heads, 8 kv heads, head_dim 128; sequence lengths 512 and 2048, about 16k tokens per batch, and a ragged
// batch at hh-rlhf's lengths (16k tokens in 120 sequences of 20-430 tokens, log-normal about a median of 120, mean
// 137: the bundled pairs' rows average 140, 280 tokens a pair unshared, bench/results/planner_data_lengths.txt),
// where the tensor-core paths alone are timed (the wide forward's 128-row blocks cover short sequences with more
// masked rows than the 64-row ones: which path Auto takes must hold there too).
// Our kernels four ways: fp32 storage (FMA path), bf16 storage on the FMA path, bf16 on the tensor-core
// path (the production one), and the wide tensor-core path (Path::MmaWide: the forward at 32 query rows a
// warp, dK/dV in 8-warp 128-key blocks; dQ the same). torch's sdpa on the same shapes:
// bench/torch/sdpa_attention.py. Median of the timed iterations after warm-up, cudaEvent timing on one stream;
// each tensor-core path's forward is also timed alone (its backward: the pair's time less it), and the wide
// path's forward and backward times are printed as ratios to the 16-row ones'. Without a GPU it prints a skip
// line and exits 0.
//   attention_bench [--iters N] [--length L] [--mma-only]
// --length: only sequences of L tokens (512, 2048 and the ragged batch by default); --mma-only: only the
// tensor-core paths, for a
// profiler (bench/gpu/profile_attention.sh: ncu on the first launch of each of the five kernels, which this
// mode makes first: the wide forward, dK/dV and dQ, then the forward and dK/dV).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/math/bf16.h"
#include "bench/cuda/event_timing.h"
#include "cuda/check.h"
#include "model/cuda/attention_kernels.h"

namespace {

namespace ca = zero::model::cuda_attention;

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kTokensPerBatch = 16384;

// Row-wise causal softmax of row-major S [L, L] in place (P), one block per row.
__global__ void causal_softmax(float* s, int64_t L) {
  const int64_t i = blockIdx.x;
  float* row = s + i * L;
  __shared__ float red[256];
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, row[j]);
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum += expf(row[j] - mx);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  sum = red[0];
  for (int64_t j = threadIdx.x; j < L; j += blockDim.x) row[j] = j <= i ? expf(row[j] - mx) / sum : 0.0f;
}

// dS = scale * P * (dP - rowsum(P * dP)) in place of dP, one block per row.
__global__ void softmax_grad(const float* p, float* dp, int64_t L, float scale) {
  const int64_t i = blockIdx.x;
  const float* pr = p + i * L;
  float* dr = dp + i * L;
  __shared__ float red[256];
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum += pr[j] * dr[j];
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  const float d = red[0];
  for (int64_t j = threadIdx.x; j < L; j += blockDim.x) dr[j] = scale * pr[j] * (dr[j] - d);
}

struct Buffers {
  float *q, *k, *v, *o, *d_o, *lse, *dq, *dk, *dv, *s, *dp;
};

// Eager attention, forward + backward, over `seqs` sequences of length L (fp32, token-major as the
// kernels). cuBLAS is column-major: a row-major [rows, cols] matrix with row stride ld is the
// column-major [cols, rows] matrix with leading dimension ld, so every product below is written for the
// transposes (S^T = K Q^T and so on).
void eager(cublasHandle_t h, const Buffers& b, int64_t seqs, int64_t L, cudaStream_t stream) {
  const float scale = 1.0f / std::sqrt(float(kHeadDim)), one = 1.0f, zero_f = 0.0f;
  const int r = int(kHeads / kKvHeads), ldq = int(kHeads * kHeadDim), ldk = int(kKvHeads * kHeadDim);
  const int n = int(L), d = int(kHeadDim);
  for (int64_t s = 0; s < seqs; ++s) {
    for (int64_t head = 0; head < kHeads; ++head) {
      const int64_t g = head / r;
      const float* q = b.q + (s * L * kHeads + head) * kHeadDim;
      const float* d_o = b.d_o + (s * L * kHeads + head) * kHeadDim;
      float* o = b.o + (s * L * kHeads + head) * kHeadDim;
      float* dq = b.dq + (s * L * kHeads + head) * kHeadDim;
      const float* k = b.k + (s * L * kKvHeads + g) * kHeadDim;
      const float* v = b.v + (s * L * kKvHeads + g) * kHeadDim;
      float* dk = b.dk + (s * L * kKvHeads + g) * kHeadDim;
      float* dv = b.dv + (s * L * kKvHeads + g) * kHeadDim;
      const float* beta = head % r == 0 ? &zero_f : &one;  // dK, dV: the group's first head overwrites
      // S = scale Q K^T
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, d, &scale, k, ldk, q, ldq, &zero_f, b.s, n));
      causal_softmax<<<unsigned(L), 256, 0, stream>>>(b.s, L);
      CUDA_CHECK(cudaGetLastError());
      // O = P V
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, d, n, n, &one, v, ldk, b.s, n, &zero_f, o, ldq));
      // dV += P^T dO
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, d, n, n, &one, d_o, ldq, b.s, n, beta, dv, ldk));
      // dP = dO V^T
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, d, &one, v, ldk, d_o, ldq, &zero_f, b.dp, n));
      softmax_grad<<<unsigned(L), 256, 0, stream>>>(b.s, b.dp, L, scale);
      CUDA_CHECK(cudaGetLastError());
      // dQ = dS K, dK += dS^T Q
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, d, n, n, &one, k, ldk, b.dp, n, &zero_f, dq, ldq));
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, d, n, n, &one, q, ldq, b.dp, n, beta, dk, ldk));
    }
  }
}

using zero::bench::median_event_ms;

// The ragged batch's sequence lengths: log-normal (median 120 tokens, sigma 0.7) from a fixed generator, clamped to
// 16-960 tokens, until kTokensPerBatch tokens are filled (the last one cut to fit).
std::vector<int64_t> ragged_lengths() {
  std::vector<int64_t> out;
  uint64_t state = 0x0ddba11;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (double(state >> 11) + 0.5) * 0x1p-53;
  };
  int64_t total = 0;
  while (total < kTokensPerBatch) {
    const double z = std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
    int64_t len = std::clamp<int64_t>(int64_t(std::lround(120.0 * std::exp(0.7 * z))), 16, 960);
    len = std::min(len, kTokensPerBatch - total);
    out.push_back(len);
    total += len;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 5;
  std::vector<int64_t> lengths = {512, 2048, 0};  // 0: the ragged batch
  bool mma_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mma-only") == 0) mma_only = true;
    else if (i + 1 < argc && std::strcmp(argv[i], "--iters") == 0) iters = std::max(1, std::atoi(argv[++i]));
    else if (i + 1 < argc && std::strcmp(argv[i], "--length") == 0) lengths = {std::clamp<int64_t>(std::atoi(argv[++i]), 64, kTokensPerBatch)};
    else {
      std::fprintf(stderr, "attention_bench: unknown argument '%s' (usage: [--iters N] [--length L] [--mma-only])\n", argv[i]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("attention_bench: no CUDA device, skipped\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("attention_bench on %s: heads %lld, kv_heads %lld, head_dim %lld, %lld tokens per batch, median of %d\n",
              prop.name, (long long)kHeads, (long long)kKvHeads, (long long)kHeadDim, (long long)kTokensPerBatch, iters);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasSetStream(handle, stream));

  for (const int64_t uniform_len : lengths) {
    // Sequences of uniform_len tokens, or the ragged batch (L: its longest; eager only for uniform ones).
    const bool ragged = uniform_len == 0;
    const std::vector<int64_t> seq_lens =
        ragged ? ragged_lengths() : std::vector<int64_t>(size_t(kTokensPerBatch / uniform_len), uniform_len);
    const int64_t seqs = int64_t(seq_lens.size()), L = *std::max_element(seq_lens.begin(), seq_lens.end());
    int64_t n = 0;
    double causal_pairs = 0;  // (query, key) pairs the causal mask keeps, per head
    for (int64_t len : seq_lens) n += len, causal_pairs += double(len) * double(len + 1) / 2.0;
    const bool with_eager = !mma_only && !ragged;
    const size_t qn = size_t(n * kHeads * kHeadDim), kn = size_t(n * kKvHeads * kHeadDim);
    std::vector<float> host(std::max(qn, kn));
    uint64_t state = 0x5eed;
    auto fill = [&](float* dst, size_t count, float spread) {
      for (size_t i = 0; i < count; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        host[i] = spread * (float(state >> 40) * 0x1p-23f - 1.0f);
      }
      CUDA_CHECK(cudaMemcpy(dst, host.data(), count * 4, cudaMemcpyHostToDevice));
    };
    Buffers b{};
    for (float** p : {&b.q, &b.o, &b.d_o, &b.dq}) CUDA_CHECK(cudaMalloc(p, qn * 4));
    for (float** p : {&b.k, &b.v, &b.dk, &b.dv}) CUDA_CHECK(cudaMalloc(p, kn * 4));
    CUDA_CHECK(cudaMalloc(&b.lse, size_t(n * kHeads) * 4));
    CUDA_CHECK(cudaMalloc(&b.s, size_t(with_eager ? L * L : 1) * 4));
    CUDA_CHECK(cudaMalloc(&b.dp, size_t(with_eager ? L * L : 1) * 4));
    fill(b.q, qn, 3.0f), fill(b.k, kn, 1.0f), fill(b.v, kn, 1.0f), fill(b.d_o, qn, 1.0f);
    // bf16 copies of the same inputs (the kernels' bf16 storage; outputs to separate buffers).
    std::vector<uint16_t> hb(qn);
    auto to_bf16 = [&](const float* src, size_t count) {
      std::vector<float> f(count);
      CUDA_CHECK(cudaMemcpy(f.data(), src, count * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; ++i) hb[i] = zero::math::f32_to_bf16(f[i]);
      void* dst = nullptr;
      CUDA_CHECK(cudaMalloc(&dst, count * 2));
      CUDA_CHECK(cudaMemcpy(dst, hb.data(), count * 2, cudaMemcpyHostToDevice));
      return dst;
    };
    void *q16 = to_bf16(b.q, qn), *k16 = to_bf16(b.k, kn), *v16 = to_bf16(b.v, kn), *do16 = to_bf16(b.d_o, qn);
    void *o16, *dq16, *dk16, *dv16;
    for (void** p : {&o16, &dq16}) CUDA_CHECK(cudaMalloc(p, qn * 2));
    for (void** p : {&dk16, &dv16}) CUDA_CHECK(cudaMalloc(p, kn * 2));

    std::vector<int32_t> cu(seqs + 1, 0);
    for (int64_t i = 0; i < seqs; ++i) cu[i + 1] = cu[i] + int32_t(seq_lens[size_t(i)]);
    int32_t* cu_d = nullptr;
    CUDA_CHECK(cudaMalloc(&cu_d, cu.size() * 4));
    CUDA_CHECK(cudaMemcpy(cu_d, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
    const zero::model::AttentionShape shape{kHeads, kKvHeads, kHeadDim};
    const ca::VarlenBatch batch{cu_d, int32_t(seqs), int32_t(L), n};
    const size_t ws_bytes = ca::backward_workspace_bytes(shape, batch);
    void* ws = nullptr;
    CUDA_CHECK(cudaMalloc(&ws, ws_bytes));

    auto flash = [&](ca::Elem t, ca::Path path, void* q, void* k, void* v, void* o, void* d_o, void* dq, void* dk,
                     void* dv) {
      return [=, &shape, &batch] {
        ca::forward(q, k, v, t, shape, batch, o, b.lse, stream, path);
        ca::backward(q, k, v, o, d_o, b.lse, t, shape, batch, dq, dk, dv, ws, ws_bytes, stream, path);
      };
    };
    if (mma_only) {
      // For the profiler (its first 5 launches of these kernels): the wide forward, dK/dV and dQ, then the 16-row
      // forward and dK/dV.
      flash(ca::Elem::BF16, ca::Path::MmaWide, q16, k16, v16, o16, do16, dq16, dk16, dv16)();
      flash(ca::Elem::BF16, ca::Path::Mma, q16, k16, v16, o16, do16, dq16, dk16, dv16)();
      CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    const double wide =
        median_event_ms(flash(ca::Elem::BF16, ca::Path::MmaWide, q16, k16, v16, o16, do16, dq16, dk16, dv16),
                        iters, stream);
    const double wide_fwd = median_event_ms(
        [=, &shape, &batch] {
          ca::forward(q16, k16, v16, ca::Elem::BF16, shape, batch, o16, b.lse, stream, ca::Path::MmaWide);
        },
        iters, stream);
    const double f32 = !with_eager ? 0.0 :
        median_event_ms(flash(ca::Elem::F32, ca::Path::Fma, b.q, b.k, b.v, b.o, b.d_o, b.dq, b.dk, b.dv),
                        iters, stream);
    const double f16 = !with_eager ? 0.0 :
        median_event_ms(flash(ca::Elem::BF16, ca::Path::Fma, q16, k16, v16, o16, do16, dq16, dk16, dv16),
                        iters, stream);
    const double tc =
        median_event_ms(flash(ca::Elem::BF16, ca::Path::Mma, q16, k16, v16, o16, do16, dq16, dk16, dv16),
                        iters, stream);
    // The tensor-core forward alone: the profile's split of the attention time (the model runs it twice a
    // step with activation checkpointing, the backward once).
    const double tc_fwd = median_event_ms(
        [=, &shape, &batch] { ca::forward(q16, k16, v16, ca::Elem::BF16, shape, batch, o16, b.lse, stream, ca::Path::Mma); },
        iters, stream);
    const double base = !with_eager ? 0.0 : median_event_ms([&] { eager(handle, b, seqs, L, stream); }, iters, stream);
    // Useful causal work: each of forward's 2 and backward's 5 tile products (FlashAttention-2's count)
    // is 2 flops per (query, key, dim) over the causal pairs per head (n L / 2 at a uniform length L). The
    // kernels' separate dQ kernel recomputes two more products; those are not counted.
    const double flops = 7.0 * 2.0 * causal_pairs * kHeadDim * kHeads;
    // "L 2048", or "ragged" (the ragged batch: its sequences and longest one are printed once, here).
    const std::string tag = ragged ? "ragged" : "L " + std::to_string(L);
    if (ragged)
      std::printf("  ragged: %lld sequences, %lld tokens, %.1f a sequence, the longest %lld\n", (long long)seqs,
                  (long long)n, double(n) / double(seqs), (long long)L);
    auto line = [&](const char* what, double ms) {
      std::printf("  %-7s  %-28s %9.3f ms  %10.0f tokens/s  %7.2f TFLOP/s (causal, fwd+bwd)", tag.c_str(), what, ms,
                  double(n) / (ms * 1e-3), flops / (ms * 1e-3) / 1e12);
      if (base > 0) std::printf("  x%.2f vs eager", base / ms);  // none under --mma-only, nor for the ragged batch
      std::printf("\n");
    };
    if (with_eager) {
      line("flash kernels fp32", f32);
      line("flash kernels bf16 storage", f16);
    }
    line("flash kernels bf16 tensor core", tc);
    line("flash kernels bf16 tc, wide", wide);
    if (with_eager) line("eager cuBLAS fp32 (baseline)", base);
    const double product = flops / 7.0;  // one tile product's useful flops
    auto split = [&](const char* what, double pair_ms, double fwd_ms) {
      std::printf("  %-7s  %-28s %9.3f ms forward (%.2f TFLOP/s), %.3f ms backward (%.2f TFLOP/s)\n", tag.c_str(),
                  what, fwd_ms, 2.0 * product / (fwd_ms * 1e-3) / 1e12, pair_ms - fwd_ms,
                  5.0 * product / ((pair_ms - fwd_ms) * 1e-3) / 1e12);
    };
    split("bf16 tensor core, split", tc, tc_fwd);
    split("bf16 tc wide, split", wide, wide_fwd);
    std::printf("  %-7s  wide / 16-row time: forward %.3f, backward %.3f, both %.3f\n", tag.c_str(),
                wide_fwd / tc_fwd, (wide - wide_fwd) / (tc - tc_fwd), wide / tc);
    std::fflush(stdout);

    for (void* p : {(void*)b.q, (void*)b.k, (void*)b.v, (void*)b.o, (void*)b.d_o, (void*)b.lse, (void*)b.dq,
                    (void*)b.dk, (void*)b.dv, (void*)b.s, (void*)b.dp, q16, k16, v16, do16, o16, dq16, dk16, dv16,
                    (void*)cu_d, ws})
      CUDA_CHECK(cudaFree(p));
  }
  CUBLAS_CHECK(cublasDestroy(handle));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
