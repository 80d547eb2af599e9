// GoogleTest main for tests run under mpirun: every rank runs every test; only rank 0 prints the
// progress listener, and the process exit code carries each rank's failures to mpirun. Running no test
// at all is a failure too.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {
// Non-zero ranks print only their failures, tagged with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
              r.line_number(), r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  // A filter that matches nothing (a typo in a ctest entry's --gtest_filter) must not pass vacuously.
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    if (rank == 0) fprintf(stderr, "no test matches the filter '%s'\n", GTEST_FLAG_GET(filter).c_str());
    rc = 1;
  }
  // Any rank's failure fails every rank, so mpirun reports it whichever rank it was.
  int any = rc;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rc != 0) fprintf(stderr, "rank %d: tests failed\n", rank);
  MPI_Finalize();
  return any;
}
