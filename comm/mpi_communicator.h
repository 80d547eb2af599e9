// Communicator over MPI on host buffers (the CPU backend). Never pass device pointers: the
// Open MPI we target is not CUDA-aware. bf16 sums use a user-defined MPI op (add in fp32, round).
// Every collective is started non-blocking and waited through a PeerWatch (comm/peer_watch.h): under
// peer_timeout() a rank that never arrives ends the job with its number instead of hanging it.
#pragma once
#include <mpi.h>

#include <functional>
#include <memory>

#include "comm/communicator.h"
#include "comm/peer_watch.h"

namespace zero {

class MpiCommunicator final : public Communicator {
 public:
  // All-reduces and reduce-scatters larger than this run as consecutive pieces of at most this many bytes (a
  // reduce-scatter's piece counts every rank's slice), each waited before the next starts. Open MPI's
  // reduce-scatter and all-reduce make a temporary the size of the message every call, which glibc maps and
  // unmaps above its mmap threshold (the pages faulted and zeroed again each call), and large messages fall out
  // of cache: at 2 ranks a 16 MiB reduce-scatter ran at 0.60 GB/s, a 1 MiB one at 1.85 (collectives_bench, raw
  // MPI columns of bench/results/mpi_pieces.txt).
  // All-gathers need no temporary and run whole.
  static constexpr size_t kPieceBytes = size_t(1) << 20;

  // Duplicates comm; errors return (and throw), never abort. `watch`: the PeerWatch its waits go through, shared
  // with other communicators (one over the whole job: make_hybrid_communicators); null: its own over `comm`.
  explicit MpiCommunicator(MPI_Comm comm, std::shared_ptr<PeerWatch> watch = nullptr);
  ~MpiCommunicator() override;
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  const char* backend_name() const override { return "mpi"; }
  bool supports_reduction(DType t) const override;
  MPI_Comm mpi_comm() const { return comm_; }
  PeerWatch& peer_watch() { return *watch_; }
  // Waits for `req` under the peer timeout (what the blocking calls and every handle use).
  void wait_request(MPI_Request& req, const WaitInfo& info);

 protected:
  CommHandle do_all_reduce(void* buf, size_t count, DType t, ReduceOp op) override;
  CommHandle do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) override;
  CommHandle do_all_gather(const void* send, void* recv, size_t send_count, DType t) override;
  void do_broadcast(void* buf, size_t count, DType t, int root) override;
  void do_barrier() override;
  void do_all_reduce_scalars(double* vals, size_t n, ReduceOp op) override;

 private:
  MPI_Op mpi_op(ReduceOp op, DType t) const;
  // A handle for a collective of `pieces` MPI calls, start(k) starting piece k once piece k-1 is done (0 pieces:
  // complete).
  CommHandle started(size_t pieces, std::function<MPI_Request(size_t)> start);
  void wait_started(MPI_Request req);   // wait for the collective just started
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
};

}  // namespace zero
