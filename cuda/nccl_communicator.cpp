#include "cuda/nccl_communicator.h"

#include <algorithm>
#include <cstdio>

#include "comm/mpi_check.h"
#include "comm/setup_deadline.h"
#include "core/check.h"
#include "cuda/check.h"

namespace zero {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::FX64: return ncclInt64;  // fixed point: summed as the integers it is
  }
  throw InternalError("nccl_type: unknown dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  throw InternalError("nccl_op: unknown op");
}

class NcclRequest final : public CommRequest {
 public:
  NcclRequest(NcclCommunicator& owner, cudaStream_t s, cudaStream_t consumer, WaitInfo info)
      : owner_(owner), consumer_(consumer), info_(std::move(info)) {
    CUDA_CHECK(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ev_, s));
  }
  ~NcclRequest() override {
    try {
      wait();  // an unfinished handle waits (the Communicator rule)
    } catch (const std::exception& e) {
      fprintf(stderr, "rank %d: %s\n", owner_.rank(), e.what());
    }
    CUDA_WARN(cudaEventDestroy(ev_));
  }
  void wait() override {
    if (done_) return;
    owner_.wait_event(ev_, info_);
    done_ = true;
  }
  void enqueue_wait() override {
    if (done_) return;
    CUDA_CHECK(cudaStreamWaitEvent(consumer_, ev_, 0));  // the compute stream waits; the host goes on
    done_ = true;
  }
  bool test() override {
    if (done_) return true;
    const cudaError_t rc = cudaEventQuery(ev_);
    if (rc == cudaSuccess) return done_ = true;
    if (rc != cudaErrorNotReady) CUDA_CHECK(rc);
    owner_.throw_if_async_error();  // still running: a failed peer or network is an error, not a hang
    return false;
  }

 private:
  NcclCommunicator& owner_;
  cudaStream_t consumer_;  // the compute (ops) stream that reads what the collective wrote
  WaitInfo info_;
  cudaEvent_t ev_ = nullptr;
  bool done_ = false;
};

}  // namespace

void NcclCommunicator::wait_event(cudaEvent_t ev, const WaitInfo& info, NcclCommunicator* also) {
  watch_->wait(
      [&] {
        const cudaError_t rc = cudaEventQuery(ev);
        if (rc == cudaSuccess) return true;
        if (rc != cudaErrorNotReady) CUDA_CHECK(rc);
        throw_if_async_error();  // a peer or the network failed (in either ring): an error now, not a hang
        if (also) also->throw_if_async_error();
        return false;
      },
      info, peer_timeout(), [&] {  // the collective its peer never joined (in one ring or the other); the job ends
        abort();
        if (also) also->abort();
      });
}

void NcclCommunicator::abort() {
  // Ends this rank's NCCL kernels, so the streams behind them drain and the destructors' synchronisations
  // return instead of hanging.
  if (nccl_) ncclCommAbort(nccl_);
  nccl_ = nullptr;
}

void NcclCommunicator::throw_if_async_error() {
  if (!nccl_) return;
  ncclResult_t async = ncclSuccess;
  NCCL_CHECK(ncclCommGetAsyncError(nccl_, &async));
  if (async == ncclSuccess || async == ncclInProgress) return;
  // NCCL's rule after an asynchronous error: abort the communicator. Its kernels may still be stuck in
  // the failed collective, with both streams behind them; unwinding with them stuck would hang in the
  // destructors (stream and device synchronisation) instead of reporting.
  abort();
  NCCL_CHECK(async);
}

HostWaitGuard NcclCommunicator::host_wait_guard(NcclCommunicator* also) {
  ZERO_CHECK(!also || also->watch_ == watch_,
             "NcclCommunicator::host_wait_guard: the second communicator must share this one's PeerWatch");
  return [this, also](cudaEvent_t done) {
    // Behind the latest collective of each ring that has had one ("#n" of the last is appended by the message).
    WaitInfo info{op_sequence(), "the compute stream behind " + op_description()};
    if (also && also->op_sequence() > 0 && op_sequence() > 0) {
      info.what = fmt::format("the compute stream behind {} #{} and {}", also->op_description(), also->op_sequence(),
                              op_description());
    } else if (also && also->op_sequence() > 0) {
      info = {also->op_sequence(), "the compute stream behind " + also->op_description()};
    }
    wait_event(done, info, also);
  };
}

void NcclCommunicator::sync_stream() {
  CUDA_CHECK(cudaEventRecord(drained_, stream_));
  wait_event(drained_, WaitInfo{op_sequence(), op_description()});
}

NcclCommunicator::NcclCommunicator(MPI_Comm comm, cudaStream_t producer, double setup_timeout_s,
                                   std::shared_ptr<PeerWatch> watch)
    : producer_(producer) {
  watch_ = std::move(watch);
  MPI_CHECK(MPI_Comm_dup(comm, &mpi_));
  MPI_CHECK(MPI_Comm_set_errhandler(mpi_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(mpi_, &rank_));
  MPI_CHECK(MPI_Comm_size(mpi_, &world_));
  // From here to the warm-up's end every call may block the host with no poll point (a wrong interface,
  // an unreachable peer: NCCL retries quietly), so a deadline ends the job with what to check instead.
  int job_rank = 0;  // the message names the rank the user launched, not its place in a shard group
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &job_rank));
  SetupDeadline deadline(
      setup_timeout_s, job_rank,
      fmt::format("NCCL did not finish setting up its communicator over {} ranks; ranks sharing one GPU talk "
                  "over loopback sockets (NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1); on a cluster check "
                  "NCCL_SOCKET_IFNAME / NCCL_IB_HCA; NCCL_DEBUG=INFO shows where it stops",
                  world_));
  ncclUniqueId id{};
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, int(sizeof(id)), MPI_BYTE, 0, mpi_));
  // Blocking stream: it also follows work on the legacy default stream (cudaMemcpy, the allocator's memset).
  CUDA_CHECK(cudaStreamCreate(&stream_));
  CUDA_CHECK(cudaEventCreateWithFlags(&produced_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&drained_, cudaEventDisableTiming));
  CUDA_CHECK(cudaMalloc(&d_scalars_, kScalarSlots * sizeof(double)));
  CUDA_CHECK(cudaMallocHost(&h_scalars_, kScalarSlots * sizeof(double)));
  NCCL_CHECK(ncclCommInitRank(&nccl_, world_, id, rank_));
  // Warm-up: since NCCL 2.22 connections are made at the first collective, possibly blocking inside the
  // call where no peer watch polls; one all-reduce of one element here puts that under the deadline too.
  CUDA_CHECK(cudaMemsetAsync(d_scalars_, 0, sizeof(double), stream_));
  NCCL_CHECK(ncclAllReduce(d_scalars_, d_scalars_, 1, ncclFloat64, ncclSum, nccl_, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  deadline.done();
  if (!watch_) watch_ = std::make_shared<PeerWatch>(mpi_);
}

NcclCommunicator::~NcclCommunicator() {
  if (stream_) CUDA_WARN(cudaStreamSynchronize(stream_));
  if (nccl_) {
    const ncclResult_t rc = ncclCommDestroy(nccl_);
    if (rc != ncclSuccess) report_gpu_error(__FILE__, __LINE__, "ncclCommDestroy", "NCCL", int(rc), ncclGetErrorString(rc));
  }
  CUDA_WARN(cudaFree(d_scalars_));
  if (h_scalars_) CUDA_WARN(cudaFreeHost(h_scalars_));
  if (produced_) CUDA_WARN(cudaEventDestroy(produced_));
  if (drained_) CUDA_WARN(cudaEventDestroy(drained_));
  if (stream_) CUDA_WARN(cudaStreamDestroy(stream_));
  watch_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && mpi_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_);
}

bool NcclCommunicator::supports_reduction(DType t) const {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::F64 || t == DType::FX64;
}

void NcclCommunicator::follow_producer() {
  if (!producer_) return;
  CUDA_CHECK(cudaEventRecord(produced_, producer_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, produced_, 0));
}

CommHandle NcclCommunicator::finish() {
  return std::make_unique<NcclRequest>(*this, stream_, producer_, WaitInfo{op_sequence(), op_description()});
}

CommHandle NcclCommunicator::do_all_reduce(void* buf, size_t count, DType t, ReduceOp op) {
  ZERO_REQUIRE(supports_reduction(t), ConfigError, "reduction dtype {} is not supported by the nccl backend",
               dtype_name(t));
  follow_producer();
  NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(t), nccl_op(op), nccl_, stream_));
  return finish();
}

CommHandle NcclCommunicator::do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType t,
                                               ReduceOp op) {
  ZERO_REQUIRE(supports_reduction(t), ConfigError, "reduction dtype {} is not supported by the nccl backend",
               dtype_name(t));
  follow_producer();
  NCCL_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_type(t), nccl_op(op), nccl_, stream_));
  return finish();
}

CommHandle NcclCommunicator::do_all_gather(const void* send, void* recv, size_t send_count, DType t) {
  follow_producer();
  NCCL_CHECK(ncclAllGather(send, recv, send_count, nccl_type(t), nccl_, stream_));
  return finish();
}

void NcclCommunicator::do_broadcast(void* buf, size_t count, DType t, int root) {
  ZERO_CHECK(root >= 0 && root < world_, "broadcast: root {} out of range [0, {})", root, world_);
  follow_producer();
  NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_type(t), root, nccl_, stream_));
  sync_stream();
}

void NcclCommunicator::do_barrier() {
  follow_producer();
  sync_stream();
  MPI_Request r;
  MPI_CHECK(MPI_Ibarrier(mpi_, &r));
  watch_->wait(
      [&] {
        int done = 0;
        MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      WaitInfo{op_sequence(), op_description()}, peer_timeout());
}

void NcclCommunicator::do_all_reduce_scalars(double* vals, size_t n, ReduceOp op) {
  // Host values: no producer dependency. Blocking, in chunks of the device scratch.
  for (size_t off = 0; off < n; off += kScalarSlots) {
    const size_t len = std::min(kScalarSlots, n - off);
    std::copy_n(vals + off, len, h_scalars_);
    CUDA_CHECK(cudaMemcpyAsync(d_scalars_, h_scalars_, len * sizeof(double), cudaMemcpyHostToDevice, stream_));
    NCCL_CHECK(ncclAllReduce(d_scalars_, d_scalars_, len, ncclFloat64, nccl_op(op), nccl_, stream_));
    CUDA_CHECK(cudaMemcpyAsync(h_scalars_, d_scalars_, len * sizeof(double), cudaMemcpyDeviceToHost, stream_));
    sync_stream();  // polls under the peer timeout
    std::copy_n(h_scalars_, len, vals + off);
  }
}

}  // namespace zero
