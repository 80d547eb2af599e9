#include "tests/common/pmpi_counter.h"

#include <mpi.h>

namespace zero::testing {
PmpiCounts& pmpi_counts() {
  static PmpiCounts c;
  return c;
}
void pmpi_reset() { pmpi_counts() = {}; }
}  // namespace zero::testing

using zero::testing::pmpi_counts;

extern "C" {

int MPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  pmpi_counts().iallreduce.calls++;
  pmpi_counts().iallreduce.count_args += uint64_t(n);
  return PMPI_Iallreduce(s, r, n, t, op, c, q);
}
int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  pmpi_counts().allreduce.calls++;
  pmpi_counts().allreduce.count_args += uint64_t(n);
  return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Ireduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  pmpi_counts().ireduce_scatter_block.calls++;
  pmpi_counts().ireduce_scatter_block.count_args += uint64_t(n);
  return PMPI_Ireduce_scatter_block(s, r, n, t, op, c, q);
}
int MPI_Reduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  pmpi_counts().reduce_scatter_block.calls++;
  pmpi_counts().reduce_scatter_block.count_args += uint64_t(n);
  return PMPI_Reduce_scatter_block(s, r, n, t, op, c);
}
int MPI_Iallgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request* q) {
  pmpi_counts().iallgather.calls++;
  pmpi_counts().iallgather.count_args += uint64_t(rn);
  return PMPI_Iallgather(s, sn, st, r, rn, rt, c, q);
}
int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  pmpi_counts().allgather.calls++;
  pmpi_counts().allgather.count_args += uint64_t(rn);
  return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  pmpi_counts().bcast.calls++;
  pmpi_counts().bcast.count_args += uint64_t(n);
  return PMPI_Bcast(b, n, t, root, c);
}

}  // extern "C"
