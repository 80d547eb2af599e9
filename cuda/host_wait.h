// Host waits for the compute stream. That stream can be stalled behind a collective (it waits on NCCL's
// events: NcclCommunicator's enqueue_wait), so a blind cudaStreamSynchronize there blocks for ever when a
// peer died or stopped: the silent hang PeerWatch exists to prevent. Every host wait of the CUDA backend
// on the compute stream (CudaOps' downloads and host copies, CudaModelOps' metrics and batch upload, the
// step clock) goes through a StreamWaiter: with a guard installed (NcclCommunicator::host_wait_guard(): polls
// under the peer timeout, names the ranks that did not arrive, ends the job) the wait is watched; without
// one (one process, no collective: `pmtrain score`, single-GPU tests) it is cudaEventSynchronize.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

namespace zero {

// Returns once `done` (an event recorded on a stream) has completed; throws or ends the job otherwise.
using HostWaitGuard = std::function<void(cudaEvent_t done)>;

class StreamWaiter {
 public:
  explicit StreamWaiter(cudaStream_t stream, HostWaitGuard guard = {});  // on the current device
  ~StreamWaiter();
  StreamWaiter(const StreamWaiter&) = delete;
  StreamWaiter& operator=(const StreamWaiter&) = delete;

  void set_guard(HostWaitGuard guard) { guard_ = std::move(guard); }
  const HostWaitGuard& guard() const { return guard_; }
  // Returns when everything queued on the stream so far has finished.
  void wait();
  // Returns when `ev`, recorded on any stream by the caller, has completed.
  void wait(cudaEvent_t ev) const;
  // Before a copy between the device and pageable (not pinned) host memory on the stream: a driver may wait
  // for everything queued on the stream inside that cudaMemcpyAsync, where no guard watches it (a silent
  // hang when the stream waits on a collective a lost peer never joins). Draining the stream first, watched,
  // leaves the copy nothing to wait behind.
  void before_pageable_copy() { wait(); }
  // The same as wait(ev) for an event that has usually completed long before (a staging buffer's previous upload):
  // a query, and the (watched) wait only when it has not.
  void wait_if_pending(cudaEvent_t ev) const;

 private:
  cudaStream_t stream_;
  cudaEvent_t drained_ = nullptr;
  HostWaitGuard guard_;
};

}  // namespace zero
