// RawAllocator over device memory (cudaMalloc / cudaFree) on the current device, zeroed like the host
// one (engine padding must start at zero). Wrap it in a TrackingAllocator for the engine.
// Ordering: the zeroing cudaMemset runs on the legacy default stream; the backend's streams (CudaOps,
// NcclCommunicator) are blocking streams, so work queued on them afterwards sees zeroed memory.
// cudaFree synchronizes the device: fine for long-lived buffers; stage 3's per-gather buffers want a
// caching or stream-ordered (cudaMallocAsync) allocator later.
#pragma once
#include <memory>

#include "core/memory.h"

namespace zero {

std::unique_ptr<RawAllocator> make_device_allocator();
// Page-locked host memory (cudaMallocHost / cudaFreeHost), zeroed: staging that copies to and from the device
// at the link's full rate. Keep it small (it cannot be paged out); CudaOps::make_staging_allocator.
std::unique_ptr<RawAllocator> make_pinned_host_allocator();

}  // namespace zero
