// The emulated runtime's streams (fake_cudart.cpp, fake_nccl.cpp, fake_cublaslt.cpp, and every kernel launch
// through simt::on_stream). By default a stream's work runs inside the call that queues it, so every stream is
// already ordered and a missing cross-stream wait cannot show. ZERO_EMULATED_STREAMS defers it, as a GPU does:
//   ZERO_EMULATED_STREAMS=first   queued work runs only when the host needs it (a stream, event or device
//   ZERO_EMULATED_STREAMS=last    synchronisation or query, a synchronous copy or set, a free, a copy into
//                                 pageable memory), and then in an order CUDA allows but that is as far from
//                                 the host's as the waits let it be: each step runs the head of the first
//                                 stream, by creation order (`first`: CudaOps' compute stream before NCCL's) or
//                                 the last (`last`), whose head is not waiting on an event recorded later, so
//                                 that stream runs as far ahead of the others as it may and they as late.
// A read of a buffer before the collective that fills it, a reuse of a buffer a collective still reads, or a
// host read of pinned memory before its copy ran then sees stale bytes (the guarded, NaN-filled memory of
// fake_cudart.cpp makes that loud) in one order or the other, where a GPU would show it only by chance.
// Cross-rank: each rank runs its NCCL work at its own synchronisations; the MPI collectives under it then
// block until the peers get there, as they would on a GPU.
// Not modelled: work that truly runs at once on a GPU (two streams' kernels side by side).
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

namespace zero::fake_cuda {

// Whether ZERO_EMULATED_STREAMS defers work (read once; an unknown value aborts, naming the variable).
bool deferring();

// Queues `run` on stream s, to run when `ready` says so (never asked again once true; empty: ready at
// once). Not deferring, it runs now (ready is then true: everything before it has run). The legacy default
// stream (nullptr) orders itself after every stream's queued work, as cudaStreamCreate's blocking streams do.
void enqueue(cudaStream_t s, std::function<void()> run, std::function<bool()> ready = {});

// Runs queued work, in the order ZERO_EMULATED_STREAMS names, until `done()` holds. Aborts, naming `what`,
// if nothing queued can run and it still does not.
void run_until(const std::function<bool()>& done, const char* what);
void drain_stream(cudaStream_t s);  // until everything queued on s has run
void drain_all();                   // until nothing is queued anywhere

// A new stream takes the next place in the creation order; a destroyed one's queued work runs first.
void stream_created(cudaStream_t s);
void stream_destroyed(cudaStream_t s);

}  // namespace zero::fake_cuda
