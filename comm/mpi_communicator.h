// Communicator over MPI on host buffers (the CPU backend). Never pass device pointers: the
// Open MPI we target is not CUDA-aware. bf16 sums use a user-defined MPI op (add in fp32, round).
// Every collective is started non-blocking and waited through a PeerWatch (comm/peer_watch.h): under
// peer_timeout() a rank that never arrives ends the job with its number instead of hanging it.
#pragma once
#include <mpi.h>

#include <memory>

#include "comm/communicator.h"
#include "comm/peer_watch.h"

namespace zero {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm);  // duplicates comm; errors return (and throw), never abort
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
  CommHandle started(MPI_Request req);  // a handle for the collective just started
  void wait_started(MPI_Request req);   // wait for the collective just started
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  std::unique_ptr<PeerWatch> watch_;
};

}  // namespace zero
