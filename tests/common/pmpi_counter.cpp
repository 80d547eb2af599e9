#include "tests/common/pmpi_counter.h"

#include <mpi.h>

#include <algorithm>
#include <mutex>

namespace zero::testing {
namespace {
std::mutex& counts_mutex() {
  static std::mutex m;
  return m;
}
PmpiCounts& counts() {
  static PmpiCounts c;
  return c;
}
void note(const char* function, uint64_t count, uint64_t bytes = 0) {
  std::lock_guard lock(counts_mutex());
  PmpiCount& c = counts()[function];
  c.calls++;
  c.count_args += count;
  c.max_count_arg = std::max(c.max_count_arg, count);
  c.bytes += bytes;
}
uint64_t type_size(MPI_Datatype t) {
  int size = 0;
  PMPI_Type_size(t, &size);
  return uint64_t(size);
}
uint64_t sum(const int* counts_per_rank, MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  uint64_t s = 0;
  for (int i = 0; i < n; ++i) s += uint64_t(counts_per_rank[i]);
  return s;
}
}  // namespace

PmpiCounts pmpi_counts() {
  std::lock_guard lock(counts_mutex());
  return counts();
}
PmpiCount pmpi_count(const std::string& function) {
  std::lock_guard lock(counts_mutex());
  auto it = counts().find(function);
  return it == counts().end() ? PmpiCount{} : it->second;
}
void pmpi_reset() {
  std::lock_guard lock(counts_mutex());
  counts().clear();
}
}  // namespace zero::testing

using zero::testing::note;
using zero::testing::sum;
using zero::testing::type_size;

// COUNTED(Name, count expression, (parameters), (arguments)) defines MPI_Name: note the call, then PMPI_Name.
#define COUNTED(name, count, params, args) \
  int MPI_##name params {                  \
    note("MPI_" #name, uint64_t(count));   \
    return PMPI_##name args;               \
  }
// A reduction: also its bytes, count x the size of its datatype `t`.
#define COUNTED_REDUCTION(name, count, params, args)               \
  int MPI_##name params {                                          \
    note("MPI_" #name, uint64_t(count), uint64_t(count) * type_size(t)); \
    return PMPI_##name args;                                       \
  }
namespace {
using cvp = const void*;
using cip = const int*;
using T = MPI_Datatype;
using Req = MPI_Request*;
}  // namespace

extern "C" {
// Point-to-point. Persistent requests are counted when they are set up (MPI_*_init).
COUNTED(Send, n, (cvp b, int n, T t, int d, int g, MPI_Comm c), (b, n, t, d, g, c))
COUNTED(Bsend, n, (cvp b, int n, T t, int d, int g, MPI_Comm c), (b, n, t, d, g, c))
COUNTED(Ssend, n, (cvp b, int n, T t, int d, int g, MPI_Comm c), (b, n, t, d, g, c))
COUNTED(Rsend, n, (cvp b, int n, T t, int d, int g, MPI_Comm c), (b, n, t, d, g, c))
COUNTED(Isend, n, (cvp b, int n, T t, int d, int g, MPI_Comm c, Req q), (b, n, t, d, g, c, q))
COUNTED(Ibsend, n, (cvp b, int n, T t, int d, int g, MPI_Comm c, Req q), (b, n, t, d, g, c, q))
COUNTED(Issend, n, (cvp b, int n, T t, int d, int g, MPI_Comm c, Req q), (b, n, t, d, g, c, q))
COUNTED(Irsend, n, (cvp b, int n, T t, int d, int g, MPI_Comm c, Req q), (b, n, t, d, g, c, q))
COUNTED(Send_init, n, (cvp b, int n, T t, int d, int g, MPI_Comm c, Req q), (b, n, t, d, g, c, q))
COUNTED(Bsend_init, n, (cvp b, int n, T t, int d, int g, MPI_Comm c, Req q), (b, n, t, d, g, c, q))
COUNTED(Ssend_init, n, (cvp b, int n, T t, int d, int g, MPI_Comm c, Req q), (b, n, t, d, g, c, q))
COUNTED(Rsend_init, n, (cvp b, int n, T t, int d, int g, MPI_Comm c, Req q), (b, n, t, d, g, c, q))
COUNTED(Recv, n, (void* b, int n, T t, int s, int g, MPI_Comm c, MPI_Status* st), (b, n, t, s, g, c, st))
COUNTED(Irecv, n, (void* b, int n, T t, int s, int g, MPI_Comm c, Req q), (b, n, t, s, g, c, q))
COUNTED(Recv_init, n, (void* b, int n, T t, int s, int g, MPI_Comm c, Req q), (b, n, t, s, g, c, q))
COUNTED(Mrecv, n, (void* b, int n, T t, MPI_Message* m, MPI_Status* st), (b, n, t, m, st))
COUNTED(Imrecv, n, (void* b, int n, T t, MPI_Message* m, Req q), (b, n, t, m, q))
COUNTED(Sendrecv, sn + rn,
        (cvp sb, int sn, T st, int d, int sg, void* rb, int rn, T rt, int s, int rg, MPI_Comm c, MPI_Status* x),
        (sb, sn, st, d, sg, rb, rn, rt, s, rg, c, x))
COUNTED(Sendrecv_replace, n, (void* b, int n, T t, int d, int sg, int s, int rg, MPI_Comm c, MPI_Status* x),
        (b, n, t, d, sg, s, rg, c, x))

// Collectives and their non-blocking forms.
COUNTED(Bcast, n, (void* b, int n, T t, int root, MPI_Comm c), (b, n, t, root, c))
COUNTED(Ibcast, n, (void* b, int n, T t, int root, MPI_Comm c, Req q), (b, n, t, root, c, q))
COUNTED_REDUCTION(Reduce, n, (cvp s, void* r, int n, T t, MPI_Op op, int root, MPI_Comm c), (s, r, n, t, op, root, c))
COUNTED_REDUCTION(Ireduce, n, (cvp s, void* r, int n, T t, MPI_Op op, int root, MPI_Comm c, Req q), (s, r, n, t, op, root, c, q))
COUNTED_REDUCTION(Allreduce, n, (cvp s, void* r, int n, T t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
COUNTED_REDUCTION(Iallreduce, n, (cvp s, void* r, int n, T t, MPI_Op op, MPI_Comm c, Req q), (s, r, n, t, op, c, q))
COUNTED(Scan, n, (cvp s, void* r, int n, T t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
COUNTED(Iscan, n, (cvp s, void* r, int n, T t, MPI_Op op, MPI_Comm c, Req q), (s, r, n, t, op, c, q))
COUNTED(Exscan, n, (cvp s, void* r, int n, T t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
COUNTED(Iexscan, n, (cvp s, void* r, int n, T t, MPI_Op op, MPI_Comm c, Req q), (s, r, n, t, op, c, q))
COUNTED_REDUCTION(Reduce_scatter_block, n, (cvp s, void* r, int n, T t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
COUNTED_REDUCTION(Ireduce_scatter_block, n, (cvp s, void* r, int n, T t, MPI_Op op, MPI_Comm c, Req q), (s, r, n, t, op, c, q))
COUNTED_REDUCTION(Reduce_scatter, sum(n, c), (cvp s, void* r, cip n, T t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
COUNTED_REDUCTION(Ireduce_scatter, sum(n, c), (cvp s, void* r, cip n, T t, MPI_Op op, MPI_Comm c, Req q), (s, r, n, t, op, c, q))
COUNTED(Allgather, rn, (cvp s, int sn, T st, void* r, int rn, T rt, MPI_Comm c), (s, sn, st, r, rn, rt, c))
COUNTED(Iallgather, rn, (cvp s, int sn, T st, void* r, int rn, T rt, MPI_Comm c, Req q), (s, sn, st, r, rn, rt, c, q))
COUNTED(Allgatherv, sum(rn, c), (cvp s, int sn, T st, void* r, cip rn, cip rd, T rt, MPI_Comm c),
        (s, sn, st, r, rn, rd, rt, c))
COUNTED(Iallgatherv, sum(rn, c), (cvp s, int sn, T st, void* r, cip rn, cip rd, T rt, MPI_Comm c, Req q),
        (s, sn, st, r, rn, rd, rt, c, q))
// Gathers and scatters: the count every rank passes (the root's arrays exist only at the root).
COUNTED(Gather, sn, (cvp s, int sn, T st, void* r, int rn, T rt, int root, MPI_Comm c), (s, sn, st, r, rn, rt, root, c))
COUNTED(Igather, sn, (cvp s, int sn, T st, void* r, int rn, T rt, int root, MPI_Comm c, Req q),
        (s, sn, st, r, rn, rt, root, c, q))
COUNTED(Gatherv, sn, (cvp s, int sn, T st, void* r, cip rn, cip rd, T rt, int root, MPI_Comm c),
        (s, sn, st, r, rn, rd, rt, root, c))
COUNTED(Igatherv, sn, (cvp s, int sn, T st, void* r, cip rn, cip rd, T rt, int root, MPI_Comm c, Req q),
        (s, sn, st, r, rn, rd, rt, root, c, q))
COUNTED(Scatter, rn, (cvp s, int sn, T st, void* r, int rn, T rt, int root, MPI_Comm c), (s, sn, st, r, rn, rt, root, c))
COUNTED(Iscatter, rn, (cvp s, int sn, T st, void* r, int rn, T rt, int root, MPI_Comm c, Req q),
        (s, sn, st, r, rn, rt, root, c, q))
COUNTED(Scatterv, rn, (cvp s, cip sn, cip sd, T st, void* r, int rn, T rt, int root, MPI_Comm c),
        (s, sn, sd, st, r, rn, rt, root, c))
COUNTED(Iscatterv, rn, (cvp s, cip sn, cip sd, T st, void* r, int rn, T rt, int root, MPI_Comm c, Req q),
        (s, sn, sd, st, r, rn, rt, root, c, q))
COUNTED(Alltoall, rn, (cvp s, int sn, T st, void* r, int rn, T rt, MPI_Comm c), (s, sn, st, r, rn, rt, c))
COUNTED(Ialltoall, rn, (cvp s, int sn, T st, void* r, int rn, T rt, MPI_Comm c, Req q), (s, sn, st, r, rn, rt, c, q))
COUNTED(Alltoallv, sum(sn, c), (cvp s, cip sn, cip sd, T st, void* r, cip rn, cip rd, T rt, MPI_Comm c),
        (s, sn, sd, st, r, rn, rd, rt, c))
COUNTED(Ialltoallv, sum(sn, c), (cvp s, cip sn, cip sd, T st, void* r, cip rn, cip rd, T rt, MPI_Comm c, Req q),
        (s, sn, sd, st, r, rn, rd, rt, c, q))
COUNTED(Alltoallw, sum(sn, c), (cvp s, cip sn, cip sd, const T* st, void* r, cip rn, cip rd, const T* rt, MPI_Comm c),
        (s, sn, sd, st, r, rn, rd, rt, c))
COUNTED(Ialltoallw, sum(sn, c),
        (cvp s, cip sn, cip sd, const T* st, void* r, cip rn, cip rd, const T* rt, MPI_Comm c, Req q),
        (s, sn, sd, st, r, rn, rd, rt, c, q))

// One-sided.
COUNTED(Put, n, (cvp o, int n, T ot, int tr, MPI_Aint td, int tn, T tt, MPI_Win w), (o, n, ot, tr, td, tn, tt, w))
COUNTED(Get, n, (void* o, int n, T ot, int tr, MPI_Aint td, int tn, T tt, MPI_Win w), (o, n, ot, tr, td, tn, tt, w))
COUNTED(Accumulate, n, (cvp o, int n, T ot, int tr, MPI_Aint td, int tn, T tt, MPI_Op op, MPI_Win w),
        (o, n, ot, tr, td, tn, tt, op, w))
COUNTED(Get_accumulate, n,
        (cvp o, int n, T ot, void* r, int rn, T rt, int tr, MPI_Aint td, int tn, T tt, MPI_Op op, MPI_Win w),
        (o, n, ot, r, rn, rt, tr, td, tn, tt, op, w))
COUNTED(Rput, n, (cvp o, int n, T ot, int tr, MPI_Aint td, int tn, T tt, MPI_Win w, Req q),
        (o, n, ot, tr, td, tn, tt, w, q))
COUNTED(Rget, n, (void* o, int n, T ot, int tr, MPI_Aint td, int tn, T tt, MPI_Win w, Req q),
        (o, n, ot, tr, td, tn, tt, w, q))
COUNTED(Raccumulate, n, (cvp o, int n, T ot, int tr, MPI_Aint td, int tn, T tt, MPI_Op op, MPI_Win w, Req q),
        (o, n, ot, tr, td, tn, tt, op, w, q))
COUNTED(Rget_accumulate, n,
        (cvp o, int n, T ot, void* r, int rn, T rt, int tr, MPI_Aint td, int tn, T tt, MPI_Op op, MPI_Win w, Req q),
        (o, n, ot, r, rn, rt, tr, td, tn, tt, op, w, q))
COUNTED(Fetch_and_op, 1, (cvp o, void* r, T t, int tr, MPI_Aint td, MPI_Op op, MPI_Win w), (o, r, t, tr, td, op, w))
COUNTED(Compare_and_swap, 1, (cvp o, cvp cmp, void* r, T t, int tr, MPI_Aint td, MPI_Win w), (o, cmp, r, t, tr, td, w))
}  // extern "C"
