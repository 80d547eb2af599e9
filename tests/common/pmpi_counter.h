// Counts what is really handed to MPI, measured at the MPI boundary through the PMPI profiling
// interface: linking this file into a test binary interposes every MPI entry point that moves data
// (point-to-point, blocking and non-blocking and persistent; every collective and its i-form; one-sided
// calls), so a test can assert that nothing but the expected calls put bytes on the wire.
// Not interposed: neighbor collectives (they need a topology communicator) and MPI-IO.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace zero::testing {

struct PmpiCount {
  uint64_t calls = 0;
  // Sum of the element-count argument as passed to MPI: `count` (point-to-point, bcast, reductions),
  // the per-rank `recvcount` (reduce_scatter_block, allgather, scatter, alltoall), `sendcount` (gather),
  // the sum of a count array every rank passes (reduce_scatter, allgatherv, alltoallv/w), origin_count
  // (one-sided). pmpi_counter.cpp names the argument per function.
  uint64_t count_args = 0;
  uint64_t max_count_arg = 0;  // the largest count argument of one call
  // Reductions only (the functions that take one datatype and an op): count x MPI_Type_size of that datatype,
  // the bytes each call reduces (what tells a bf16 wire from an fp32 one).
  uint64_t bytes = 0;
};
// By MPI function name ("MPI_Iallreduce"); only functions called since the last reset appear.
using PmpiCounts = std::map<std::string, PmpiCount>;

PmpiCounts pmpi_counts();
PmpiCount pmpi_count(const std::string& function);  // zero when not called
void pmpi_reset();

}  // namespace zero::testing
