// The CUDA backend's StepClock (core/step_clock.h): each timestamp is a cudaEvent recorded on the compute
// stream, so a category gets the stream's time between its scope's boundaries (a kernel's run, or the
// stream stalled on a collective's event), not the host's time to enqueue it (StepTimes::host_seconds keeps
// that apart, device_timed: an op whose two times are close was paced by its launches). Recording never waits;
// take() waits once for the window's last event (the step's work is done by then in pmtrain: it is called
// after the step's results came back) and reads every gap. Events come from a pool that grows to the
// largest window (the first step) and is reused after, so a steady state creates none.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>

#include "core/step_clock.h"
#include "cuda/host_wait.h"

namespace zero {

// `stream`: the compute stream (CudaOps::stream()), on the current device; `guard`: its host waits'
// (cuda/host_wait.h), as CudaOps::waiter() has.
std::unique_ptr<StepClock> make_event_step_clock(cudaStream_t stream, HostWaitGuard guard = {});

}  // namespace zero
