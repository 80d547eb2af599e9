#include "comm/bootstrap.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/hybrid_groups.h"
#include "comm/launch_env.h"
#include "comm/mpi_check.h"
#include "core/check.h"
#include "core/host_name.h"

namespace zero {

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  // Before MPI_Init: a singleton MPI_Init sets launcher variables of its own.
  if (read_env(EnvVar::SlurmJobId) && read_env(EnvVar::SlurmProcId)) {
    info_.launcher = "srun";
    // mpirun inside an allocation also leaves Slurm's variables (its daemons are srun's tasks): its own
    // world size then says who started the ranks.
    if (!read_env(EnvVar::OmpiWorldSize)) info_.launcher_tasks = launcher_world().value_or(0);
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
  info_.node_of_rank = nodes_of_ranks(MPI_COMM_WORLD);
  info_.node_count = 0;
  for (int r = 0; r < info_.world; ++r) info_.node_count += info_.node_of_rank[size_t(r)] == r ? 1 : 0;

  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &error_comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(error_comm_, MPI_ERRORS_RETURN));

  info_.host = host_name();
}

void require_launched_world(const LaunchInfo& info) {
  ZERO_REQUIRE(info.launcher_tasks <= info.world, ConfigError,
               "srun started {} tasks, but MPI sees a world of {} in this one: srun did not connect them through a "
               "PMI plugin this MPI reads. Launch with `srun --mpi=pmix` (see `srun --mpi=list`), or with mpirun",
               info.launcher_tasks, info.world);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (error_comm_ != MPI_COMM_NULL) MPI_Comm_free(&error_comm_);
  if (owns_) MPI_Finalize();
}

std::unique_ptr<MpiCommunicator> MpiRuntime::world_communicator() const {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

int MpiRuntime::finish_failed(const Failure& f) {
  auto say = [](const std::string& m) {
    if (m.empty()) return;
    fprintf(stderr, "%s\n", m.c_str());
    fflush(stderr);
  };
  say(f.local);
  if (info_.world == 1) {
    say(f.shared);
    return f.code;
  }
  // MIN over ranks of: the rank if it holds a shared message (else world), -code.
  int v[2] = {f.shared.empty() ? info_.world : info_.rank, -f.code};
  MPI_Request req;
  bool agreed = MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MIN, error_comm_, &req) == MPI_SUCCESS;
  const auto t0 = std::chrono::steady_clock::now();
  while (agreed) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) agreed = false;
    if (done) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(kErrorAgreementSeconds)) agreed = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!agreed) {  // some rank is elsewhere: it would wait for us forever
    say(f.shared);
    abort_all(f.code);
  }
  if (v[0] == info_.rank) say(f.shared);
  return -v[1];
}

void MpiRuntime::abort_all(int code) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace zero
