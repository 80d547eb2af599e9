// What the collective benchmarks share: the ops, the interleaved timing (ours, raw, ours, raw, ... so
// machine noise hits both alike; median of the max over ranks), nccl-tests' bus-bandwidth factors and
// the table row (size, count, time, algbw, busbw for ours and the raw library, their ratio, correctness).
#pragma once
#include <algorithm>
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

namespace zero::bench {

enum class Op { AllReduce, ReduceScatter, AllGather };

inline const char* op_name(Op o) {
  return o == Op::AllReduce ? "all_reduce" : o == Op::ReduceScatter ? "reduce_scatter" : "all_gather";
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of (ours, raw), each the max over ranks, after 'warmup' rounds of both; about 0.2 s
// of work per side, between 5 and max_iters iterations.
inline std::pair<double, double> time_interleaved(MPI_Comm comm, const std::function<void()>& ours,
                                                  const std::function<void()>& raw, int warmup, int max_iters) {
  for (int w = 0; w < warmup; ++w) { ours(); raw(); }
  MPI_Barrier(comm);
  double t0 = MPI_Wtime();
  raw();
  double one = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, comm);
  const int iters = std::clamp(int(0.2 / std::max(one, 1e-7)), 5, max_iters);
  std::vector<double> a, b;
  for (int it = 0; it < iters; ++it) {
    double both[2];
    MPI_Barrier(comm);
    t0 = MPI_Wtime();
    ours();
    both[0] = MPI_Wtime() - t0;
    MPI_Barrier(comm);
    t0 = MPI_Wtime();
    raw();
    both[1] = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, comm);
    a.push_back(both[0]);
    b.push_back(both[1]);
  }
  return {median(a), median(b)};
}

// busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for reduce-scatter and all-gather.
inline double bus_factor(Op op, int world) {
  return op == Op::AllReduce ? 2.0 * (world - 1) / world : double(world - 1) / world;
}

inline void print_table_header() {
  printf("%-15s %12s %11s %11s %9s %9s %11s %9s %9s %7s %5s\n", "op", "bytes", "count", "ours_us", "algbw", "busbw",
         "raw_us", "algbw", "busbw", "ratio", "ok");
}

// One row; times in seconds, bytes of the full (unsharded) buffer, GB = 1e9.
inline void print_table_row(Op op, double bytes, size_t count, double ours_s, double raw_s, int world, bool ok) {
  const double f = bus_factor(op, world);
  printf("%-15s %12.0f %11zu %11.2f %9.3f %9.3f %11.2f %9.3f %9.3f %7.3f %5s\n", op_name(op), bytes, count,
         ours_s * 1e6, bytes / ours_s / 1e9, bytes / ours_s / 1e9 * f, raw_s * 1e6, bytes / raw_s / 1e9,
         bytes / raw_s / 1e9 * f, ours_s / raw_s, ok ? "yes" : "NO");
}

}  // namespace zero::bench
