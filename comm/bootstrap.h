// Process bootstrap: MPI_Init under mpirun, srun (PMIx) or as a plain process, and what the launcher
// told us (rank, world, node-local rank, node count). Owns MPI's lifetime.
#pragma once
#include <memory>
#include <string>

#include "comm/mpi_communicator.h"

namespace zero {

struct LaunchInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;   // rank among the processes on this node (selects the GPU)
  int local_world = 1;
  int node_count = 1;
  std::string launcher; // "srun", "mpirun" or "none"
  std::string host;
};

class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);  // MPI_Init_thread(FUNNELED) unless already initialised
  ~MpiRuntime();                        // MPI_Finalize if we initialised it
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
  const LaunchInfo& info() const { return info_; }
  std::unique_ptr<MpiCommunicator> world_communicator() const;
  // Abort every rank (used when one rank fails, so the others never hang in a collective).
  [[noreturn]] static void abort_all(int code);

 private:
  bool owns_ = false;
  LaunchInfo info_;
};

}  // namespace zero
