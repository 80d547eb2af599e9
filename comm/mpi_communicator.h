// Communicator over MPI on host buffers (the CPU backend). Never pass device pointers: the
// Open MPI we target is not CUDA-aware. bf16 sums use a user-defined MPI op (add in fp32, round).
#pragma once
#include <mpi.h>

#include "comm/communicator.h"

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

 protected:
  CommHandle do_all_reduce(void* buf, size_t count, DType t, ReduceOp op) override;
  CommHandle do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) override;
  CommHandle do_all_gather(const void* send, void* recv, size_t send_count, DType t) override;
  void do_broadcast(void* buf, size_t count, DType t, int root) override;
  void do_barrier() override;
  void do_all_reduce_scalars(double* vals, size_t n, ReduceOp op) override;

 private:
  MPI_Op mpi_op(ReduceOp op, DType t) const;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
};

}  // namespace zero
