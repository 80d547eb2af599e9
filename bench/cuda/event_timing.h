// The GPU benches' timing: a call's median over `iters` runs after a warm-up one, each timed by two cudaEvents
// around it on `stream` (the device's time for the work it queued there, not the host's).
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "cuda/check.h"

namespace zero::bench {

template <class F>
double median_event_ms(F&& f, int iters, cudaStream_t stream) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  f();  // warm-up (and kernel attribute set-up)
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaEventRecord(a, stream));
    f();
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace zero::bench
