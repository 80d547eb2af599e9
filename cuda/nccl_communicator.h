// Communicator over NCCL on device buffers (the CUDA backend). Collectives are queued on a stream
// owned by this object; a started one is a handle backed by a cudaEvent recorded after it (wait() =
// cudaEventSynchronize, test() = cudaEventQuery). Counting and in-place rules are the Communicator's
// (comm/communicator.h): all_gather is in place when send == recv + rank * send_count, which NCCL
// detects itself. bf16 reduces natively (ncclBfloat16: sum, max, min). all_reduce_scalars takes host
// doubles and moves them through a small device buffer. barrier() is MPI_Barrier after this stream
// drains. The ncclUniqueId travels over MPI; nothing else does.
//
// Waits never block blindly: every host wait polls cudaEventQuery and ncclCommGetAsyncError under the
// peer timeout (comm/peer_watch.h); past it the NCCL communicator is aborted (ncclCommAbort frees a stream
// stuck in a collective), the ranks that did not arrive are named over MPI, and the job ends by MPI_Abort.
// Set-up cannot poll: the unique-id broadcast, ncclCommInitRank and a one-element warm-up all-reduce (since
// NCCL 2.22 connections are made at the first collective, which may block the host too) run under a
// SetupDeadline (comm/setup_deadline.h) of setup_timeout_s, kNcclSetupTimeout_s by default; past it the rank
// prints what to check (NCCL_SOCKET_IFNAME, NCCL_IB_*, NCCL_DEBUG=INFO) and exits with kExitPeerLost.
//
// Ordering: every collective first waits (on the device, through an event) for the work already queued
// on the producer stream, normally CudaOps::stream(), so a buffer the ops just wrote is read after
// the write without any host synchronisation. Work the caller queues after starting a collective must
// not touch its buffers before wait() (the engine waits its handles before reusing them).
#pragma once
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>

#include "comm/communicator.h"
#include "comm/peer_watch.h"
#include "cuda/host_wait.h"

namespace zero {

// How long NCCL may take to set up its communicator (seconds; 0 = no limit). Generous: a healthy set-up takes
// seconds, but the clock starts when this rank enters the constructor, so it also absorbs peers that arrive
// late (pmtrain's ranks meet just before, in device selection).
constexpr double kNcclSetupTimeout_s = 300;

class NcclCommunicator final : public Communicator {
 public:
  // Collective over every rank of `comm` (duplicated), on the current CUDA device: select it first
  // (cuda/device_select.h). `producer`: the stream whose earlier work each collective waits for
  // (nullptr: none beyond the legacy default stream, which the blocking internal stream already
  // follows). `setup_timeout_s`: the deadline over the NCCL set-up (see above). `watch`: the PeerWatch its waits
  // go through, shared with other communicators (one over the whole job: make_hybrid_communicators); null: its
  // own over `comm`.
  explicit NcclCommunicator(MPI_Comm comm, cudaStream_t producer = nullptr,
                            double setup_timeout_s = kNcclSetupTimeout_s, std::shared_ptr<PeerWatch> watch = nullptr);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  const char* backend_name() const override { return "nccl"; }
  bool supports_reduction(DType t) const override;

  cudaStream_t stream() const { return stream_; }
  ncclComm_t nccl_comm() const { return nccl_; }
  void set_producer(cudaStream_t producer) { producer_ = producer; }
  // Host wait for `ev` under the peer timeout; a failed peer (async NCCL error) throws. `also`: a second
  // communicator sharing this one's PeerWatch whose collectives `ev` may wait behind too: its errors are polled
  // as well, and it is aborted with this one at the deadline.
  void wait_event(cudaEvent_t ev, const WaitInfo& info, NcclCommunicator* also = nullptr);
  // Throws NCCL's asynchronous error (a failed peer or network) if there is one, after aborting the
  // communicator (NCCL's rule: its kernels would otherwise stay stuck, and every stream behind them).
  void throw_if_async_error();
  // ncclCommAbort: this rank's NCCL kernels end, its collectives are lost; only destruction follows.
  void abort();
  // The guard for host waits on the producer (compute) stream, which may be stalled behind this
  // communicator's collectives (cuda/host_wait.h): wait_event, described as waiting behind the latest
  // collective. `also`: a second communicator the same stream waits on (hybrid sharding's replicas): its
  // asynchronous errors are polled too, it is aborted with this one at the deadline, and the description
  // names its latest collective as well; it must share this one's PeerWatch (make_hybrid_communicators),
  // whose verdict then covers both rings. Valid while the communicators live.
  HostWaitGuard host_wait_guard(NcclCommunicator* also = nullptr);
  PeerWatch& peer_watch() { return *watch_; }

 protected:
  CommHandle do_all_reduce(void* buf, size_t count, DType t, ReduceOp op) override;
  CommHandle do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) override;
  CommHandle do_all_gather(const void* send, void* recv, size_t send_count, DType t) override;
  void do_broadcast(void* buf, size_t count, DType t, int root) override;
  void do_barrier() override;
  void do_all_reduce_scalars(double* vals, size_t n, ReduceOp op) override;

 private:
  void follow_producer();  // make stream_ wait for the producer's queued work
  CommHandle finish();     // a handle for what was just queued
  void sync_stream();      // host wait (under the peer timeout) for everything queued on stream_

  MPI_Comm mpi_ = MPI_COMM_NULL;
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0, world_ = 1;
  cudaStream_t stream_ = nullptr;
  cudaStream_t producer_ = nullptr;
  cudaEvent_t produced_ = nullptr;  // recorded on the producer, waited on by stream_
  static constexpr size_t kScalarSlots = 64;
  double* d_scalars_ = nullptr;  // device scratch for all_reduce_scalars
  // Its pinned host staging: a copy from the device into pageable memory blocks the host inside
  // cudaMemcpyAsync until the all-reduce before it ends, outside the peer watch (a dead peer: a silent hang).
  double* h_scalars_ = nullptr;
  cudaEvent_t drained_ = nullptr;  // recorded by sync_stream
};

}  // namespace zero
