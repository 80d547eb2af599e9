// Counts what is really passed to MPI collectives, measured at the MPI boundary through the PMPI
// profiling interface: linking this file into a test binary interposes the MPI_* entry points.
#pragma once
#include <cstdint>

namespace zero::testing {

struct PmpiCount {
  uint64_t calls = 0;
  uint64_t count_args = 0;  // sum of the element-count argument as passed to MPI
};
struct PmpiCounts {
  PmpiCount iallreduce, allreduce, ireduce_scatter_block, reduce_scatter_block, iallgather, allgather, bcast;
};

PmpiCounts& pmpi_counts();
void pmpi_reset();

}  // namespace zero::testing
