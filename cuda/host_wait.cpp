#include "cuda/host_wait.h"

#include "cuda/check.h"

namespace zero {

StreamWaiter::StreamWaiter(cudaStream_t stream, HostWaitGuard guard) : stream_(stream), guard_(std::move(guard)) {
  CUDA_CHECK(cudaEventCreateWithFlags(&drained_, cudaEventDisableTiming));
}

StreamWaiter::~StreamWaiter() {
  if (drained_) CUDA_WARN(cudaEventDestroy(drained_));
}

void StreamWaiter::wait() {
  CUDA_CHECK(cudaEventRecord(drained_, stream_));
  wait(drained_);
}

void StreamWaiter::wait(cudaEvent_t ev) const {
  if (guard_) {
    guard_(ev);
  } else {
    CUDA_CHECK(cudaEventSynchronize(ev));
  }
}

void StreamWaiter::wait_if_pending(cudaEvent_t ev) const {
  const cudaError_t e = cudaEventQuery(ev);
  if (e == cudaSuccess) return;
  if (e != cudaErrorNotReady) CUDA_CHECK(e);
  wait(ev);
}

}  // namespace zero
