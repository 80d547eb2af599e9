#include "comm/bootstrap.h"

#include <unistd.h>

#include <cstdlib>

#include "comm/launch_env.h"
#include "comm/mpi_check.h"

namespace zero {

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  // Before MPI_Init: a singleton MPI_Init sets launcher variables of its own.
  if (read_env(EnvVar::SlurmJobId) && read_env(EnvVar::SlurmProcId)) {
    info_.launcher = "srun";
  } else if (read_env(EnvVar::OmpiWorldSize) || read_env(EnvVar::PmixRank)) {
    info_.launcher = "mpirun";
  } else {
    info_.launcher = "none";
  }
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    owns_ = true;
  }
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &info_.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &info_.world));

  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info_.rank, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_rank(local, &info_.local_rank));
  MPI_CHECK(MPI_Comm_size(local, &info_.local_world));
  MPI_CHECK(MPI_Comm_free(&local));
  int leader = info_.local_rank == 0 ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(&leader, &info_.node_count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));

  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  info_.host = host;
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

std::unique_ptr<MpiCommunicator> MpiRuntime::world_communicator() const {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

void MpiRuntime::abort_all(int code) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace zero
