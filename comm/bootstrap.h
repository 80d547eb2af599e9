// Process bootstrap: MPI_Init under mpirun, srun (PMIx) or as a plain process, and what the launcher
// told us (rank, world, node-local rank, node count). Owns MPI's lifetime.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"

namespace zero {

struct LaunchInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;   // rank among the processes on this node (selects the GPU)
  int local_world = 1;
  int node_count = 1;
  std::vector<int> node_of_rank;  // index: rank; an id of its node (its lowest rank), equal ids = one node
  std::string launcher; // "srun", "mpirun" or "none"
  int launcher_tasks = 0;  // srun's task count (SLURM_STEP_NUM_TASKS) when srun started this process; 0: unknown
  std::string host;
};

// ConfigError when the launcher started more tasks than MPI's world holds: srun without a PMI plugin this MPI
// reads (a site whose MpiDefault is none) starts every task as a world of its own, so N copies of the job
// would each train alone, all on the first GPU and into one run directory.
void require_launched_world(const LaunchInfo& info);

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

  // How a failed rank ends the run so that the message that explains it always gets out: MPI_Abort on
  // one rank kills the others wherever they are, even before they print. A rank's own message (`local`)
  // is printed and flushed at once; then the failed ranks agree on one communicator kept for this alone
  // (a non-blocking all-reduce, so it cannot match a collective the others are blocked in). When every
  // rank joins within kErrorAgreementSeconds, the lowest rank holding a message that is the same on every
  // rank (`shared`: a configuration error) prints it and every rank returns the largest code, to leave
  // through MPI_Finalize, no abort. Otherwise some rank is still running or blocked elsewhere: the rank
  // prints its shared message too and aborts the job with `code`. A rank that only relays another's
  // failure passes neither message.
  struct Failure {
    std::string local;   // printed by this rank now
    std::string shared;  // printed by the lowest rank that has one
    int code = 1;
  };
  static constexpr double kErrorAgreementSeconds = 10;
  int finish_failed(const Failure& f);

 private:
  bool owns_ = false;
  MPI_Comm error_comm_ = MPI_COMM_NULL;
  LaunchInfo info_;
};

}  // namespace zero
