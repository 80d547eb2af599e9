// The CUDA runtime calls of our backend, implemented on the host for the emulated backend (see
// CMakeLists.txt here): "device" memory is host memory (256-byte aligned and guarded: guarded_memory.h;
// tracked so that cudaPointerGetAttributes and cudaMemGetInfo answer as a device would), copies and sets
// are memcpy and memset, and a kernel runs to completion (simt_emulator.h) inside its launch, so every stream
// is already ordered and synchronised, or, under ZERO_EMULATED_STREAMS, when its stream gets to it
// (deferred_streams.h: the waits, records and synchronisations below drive that); events keep the host time
// their record ran at. One device, named
// so a log cannot mistake it for a GPU, with an H100's limits (80 GiB, 227 KiB of shared memory a block).
// ZERO_EMULATED_DEVICE_GIB gives it another size (tests of the memory checks): cudaMemGetInfo and the device's
// properties report it, and a cudaMalloc past it fails as on a GPU (cudaErrorMemoryAllocation).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tests/cuda/emulated/deferred_streams.h"
#include "tests/cuda/emulated/fake_cuda_lent.h"
#include "tests/cuda/guarded_memory.h"

namespace {

size_t total_device_bytes() {
  static const size_t bytes = [] {
    const char* gib = std::getenv("ZERO_EMULATED_DEVICE_GIB");
    return gib && *gib ? size_t(std::strtod(gib, nullptr) * double(size_t(1) << 30)) : size_t(80) << 30;
  }();
  return bytes;
}
constexpr int kSharedOptin = 227 * 1024;

// Device and pinned buffers are guarded (guarded_memory.h): a kernel or copy that runs past one faults at
// the access, a write into its rounding is named when it is freed, and fresh memory reads as NaN.
struct Allocations {
  std::mutex mu;
  std::map<uintptr_t, zero::simt::GuardedBuffer> device;  // by data()
  std::map<uintptr_t, zero::simt::GuardedBuffer> pinned;
  std::map<uintptr_t, size_t> lent;  // caller memory that counts as device memory (fake_cuda_lent.h): bytes by start
  size_t device_bytes = 0;
};
Allocations& allocations() {
  static Allocations a;
  return a;
}

cudaError_t allocate(std::map<uintptr_t, zero::simt::GuardedBuffer>& into, void** p, size_t bytes) {
  zero::simt::GuardedBuffer buffer(bytes, 256);
  *p = buffer.data();
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  into.emplace(reinterpret_cast<uintptr_t>(*p), std::move(buffer));
  return cudaSuccess;
}

// Frees p's buffer; aborts, naming the buffer, when a byte around it was overwritten.
cudaError_t release(std::map<uintptr_t, zero::simt::GuardedBuffer>& from, void* p, const char* what, size_t* bytes) {
  auto it = from.find(reinterpret_cast<uintptr_t>(p));
  if (it == from.end()) return cudaErrorInvalidValue;
  bool overwritten = false;
  const std::ptrdiff_t at = it->second.first_overwritten(&overwritten);
  if (overwritten) {
    std::fprintf(stderr, "emulated %s buffer %p of %zu bytes: byte %td outside it was overwritten\n", what, p,
                 it->second.size(), at);
    std::abort();
  }
  if (bytes) *bytes = it->second.size();
  from.erase(it);
  return cudaSuccess;
}

// Whether a range of m (by start; bytes(value) long, an empty one holding its start) holds p.
template <class Map, class Bytes>
bool in_ranges(const Map& m, const void* p, Bytes bytes) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(at);
  if (it == m.begin()) return false;
  --it;
  return at < it->first + std::max<size_t>(bytes(it->second), 1);
}
bool inside(const std::map<uintptr_t, zero::simt::GuardedBuffer>& m, const void* p) {
  return in_ranges(m, p, [](const zero::simt::GuardedBuffer& b) { return b.size(); });
}

// What a real driver would do that a synchronous fake does not: a copy between the device and pageable
// (not cudaMallocHost) host memory may wait inside cudaMemcpyAsync for everything queued on its stream,
// where no host-wait guard watches (cuda/host_wait.h). Harmless on an idle stream; a silent hang on a
// stream left waiting on another stream's event (NcclCommunicator::enqueue_wait) whose collective a lost
// peer never joins. So each stream counts the cross-stream waits queued on it (cudaStreamWaitEvent) and
// what the host has seen complete (an event recorded on it after them, synchronised or queried; a
// stream or device synchronisation); a pageable copy on a stream still behind such a wait fails here,
// naming the call, as the driver would hang there.
struct StreamState {
  uint64_t seq = 0;     // operations counted on the stream (cross-stream waits and event records)
  uint64_t behind = 0;  // seq of the latest cross-stream wait
  uint64_t seen = 0;    // the host has seen the stream complete up to this seq
};
// Where an event's records stand on its stream: `issued` records queued, the latest of them that ran
// (`done`), and when. Shared with the queued records and waits, which may outlive the event (a GPU lets
// an event be destroyed while its record is pending).
struct EventProgress {
  uint64_t issued = 0, done = 0;
  std::chrono::steady_clock::time_point at{};
};
struct FakeEvent {
  std::shared_ptr<EventProgress> progress = std::make_shared<EventProgress>();
  cudaStream_t stream = nullptr;
  uint64_t seq = 0;
  bool timing = true;     // not created with cudaEventDisableTiming
  bool recorded = false;
};
// The event's latest record has run (or it was never recorded).
bool complete(const FakeEvent* ev) { return ev->progress->done >= ev->progress->issued; }
struct Streams {
  std::mutex mu;
  std::map<cudaStream_t, StreamState> state;
};
Streams& streams() {
  static Streams s;
  return s;
}
void seen_up_to(cudaStream_t s, uint64_t seq) {
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  StreamState& st = all.state[s];
  if (seq > st.seen) st.seen = seq;
}
bool pinned_or_device(const void* p) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  return inside(a.pinned, p) || inside(a.device, p);
}
// cudaErrorNotPermitted (and a line naming it) for a pageable copy behind an unseen cross-stream wait.
cudaError_t check_pageable_copy(void* dst, const void* src, cudaStream_t s) {
  if (pinned_or_device(dst) && pinned_or_device(src)) return cudaSuccess;
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  const StreamState& st = all.state[s];
  if (st.behind <= st.seen) return cudaSuccess;
  std::fprintf(stderr,
               "emulated runtime: cudaMemcpyAsync between the device and pageable host memory (dst %p, src %p) on a "
               "stream still waiting on another stream's event: a driver may wait for it inside the call, where no "
               "guard watches (wait for the stream first, or copy through pinned memory)\n",
               dst, src);
  return cudaErrorNotPermitted;
}

bool inside_lent(const std::map<uintptr_t, size_t>& m, const void* p) {
  return in_ranges(m, p, [](size_t bytes) { return bytes; });
}
bool pageable(const void* p) {
  if (pinned_or_device(p)) return false;
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  return !inside_lent(a.lent, p);
}

}  // namespace

extern "C" {

void zero_fake_cuda_lend(const void* p, size_t bytes) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  if (!a.lent.emplace(reinterpret_cast<uintptr_t>(p), bytes).second) {
    std::fprintf(stderr, "emulated runtime: %p lent twice\n", p);
    std::abort();
  }
}
void zero_fake_cuda_unlend(const void* p) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  if (a.lent.erase(reinterpret_cast<uintptr_t>(p)) == 0) {
    std::fprintf(stderr, "emulated runtime: %p unlent but not lent\n", p);
    std::abort();
  }
}

cudaError_t cudaMalloc(void** p, size_t size) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  if (size > total_device_bytes() - a.device_bytes) return cudaErrorMemoryAllocation;
  const cudaError_t rc = allocate(a.device, p, size);
  if (rc == cudaSuccess) a.device_bytes += size;
  return rc;
}
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  zero::fake_cuda::drain_all();  // as the runtime's cudaFree, which synchronises the device
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  size_t bytes = 0;
  const cudaError_t rc = release(a.device, p, "device", &bytes);
  a.device_bytes -= bytes;
  return rc;
}
cudaError_t cudaMallocHost(void** p, size_t size) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  return allocate(a.pinned, p, size);
}
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int) { return cudaMallocHost(p, size); }
cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  zero::fake_cuda::drain_all();
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  return release(a.pinned, p, "pinned", nullptr);
}

// On the legacy stream: after all queued work (every stream of ours is a blocking one).
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind) {
  zero::fake_cuda::drain_all();
  if (count) std::memmove(dst, src, count);
  return cudaSuccess;
}
// As the runtime's: from pageable memory the source is staged before the call returns; into pageable
// memory the call returns once the copy is done; between pinned or device buffers it runs in its turn.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  if (const cudaError_t rc = check_pageable_copy(dst, src, s); rc != cudaSuccess) return rc;
  if (pageable(src)) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + count);
    zero::fake_cuda::enqueue(s, [dst, staged] { std::memmove(dst, staged->data(), staged->size()); });
  } else {
    zero::fake_cuda::enqueue(s, [dst, src, count] { std::memmove(dst, src, count); });
  }
  if (pageable(dst)) zero::fake_cuda::drain_stream(s);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t count) {
  zero::fake_cuda::drain_all();
  if (count) std::memset(p, value, count);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t s) {
  if (count) zero::fake_cuda::enqueue(s, [p, value, count] { std::memset(p, value, count); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  *s = reinterpret_cast<cudaStream_t>(new char);  // a distinct handle a stream
  zero::fake_cuda::stream_created(*s);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  zero::fake_cuda::stream_destroyed(s);  // its queued work completes first, as on a GPU
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  all.state.erase(s);
  delete reinterpret_cast<char*>(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  zero::fake_cuda::drain_stream(s);
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  StreamState& st = all.state[s];
  st.seen = st.seq;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  // The wait is for the event's latest record queued so far, as the runtime's.
  std::shared_ptr<EventProgress> progress = reinterpret_cast<FakeEvent*>(e)->progress;
  const uint64_t record = progress->issued;
  zero::fake_cuda::enqueue(s, [] {}, [progress, record] { return progress->done >= record; });
  if (reinterpret_cast<FakeEvent*>(e)->stream == s) return cudaSuccess;  // its own event: no cross-stream wait
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  StreamState& st = all.state[s];
  st.behind = ++st.seq;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
  zero::fake_cuda::drain_all();
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  for (auto& [stream, st] : all.state) st.seen = st.seq;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = reinterpret_cast<cudaEvent_t>(new FakeEvent);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  cudaEventCreate(e);
  reinterpret_cast<FakeEvent*>(*e)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  FakeEvent* ev = reinterpret_cast<FakeEvent*>(e);
  std::shared_ptr<EventProgress> progress = ev->progress;
  const uint64_t record = ++progress->issued;
  zero::fake_cuda::enqueue(s, [progress, record] {
    progress->done = std::max(progress->done, record);
    progress->at = std::chrono::steady_clock::now();
  });
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  ev->stream = s;
  ev->seq = ++all.state[s].seq;
  ev->recorded = true;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  const FakeEvent* ev = reinterpret_cast<FakeEvent*>(e);
  zero::fake_cuda::run_until([ev] { return complete(ev); }, "an event synchronisation");
  seen_up_to(ev->stream, ev->seq);
  return cudaSuccess;
}
// The device catches up while the host polls: a query runs the queued work the event needs.
cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  // As the runtime: an event made with cudaEventDisableTiming, or never recorded, has no time to give.
  for (const cudaEvent_t e : {start, end}) {
    const FakeEvent* ev = reinterpret_cast<const FakeEvent*>(e);
    if (!ev->timing || !ev->recorded) return cudaErrorInvalidResourceHandle;
  }
  for (const cudaEvent_t e : {start, end})
    if (!complete(reinterpret_cast<const FakeEvent*>(e))) return cudaErrorNotReady;  // its record has not run
  *ms = std::chrono::duration<float, std::milli>(reinterpret_cast<FakeEvent*>(end)->progress->at -
                                                 reinterpret_cast<FakeEvent*>(start)->progress->at)
            .count();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "zero SIMT emulator (host, not a GPU)", sizeof prop->name - 1);
  std::memcpy(prop->uuid.bytes, "zero-emulator-00", 16);
  prop->totalGlobalMem = total_device_bytes();
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = kSharedOptin;
  prop->major = 9, prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = kSharedOptin; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    default: *value = 0;
  }
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void*, enum cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize && value > kSharedOptin) return cudaErrorInvalidValue;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  *total = total_device_bytes();
  *free = *total - a.device_bytes;
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
  std::memset(attributes, 0, sizeof *attributes);
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  if (inside(a.device, ptr) || inside_lent(a.lent, ptr)) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->devicePointer = const_cast<void*>(ptr);
  } else if (inside(a.pinned, ptr)) {
    attributes->type = cudaMemoryTypeHost;
    attributes->hostPointer = const_cast<void*>(ptr);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
  }
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error (emulated runtime)" : "error (emulated runtime)";
}
const char* cudaGetErrorName(cudaError_t error) { return error == cudaSuccess ? "cudaSuccess" : "cudaError"; }

}  // extern "C"
