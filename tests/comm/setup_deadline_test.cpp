// The set-up deadline (comm/setup_deadline.h): a step that finishes in time is left alone and disarming
// does not wait for the deadline; a step that outlasts it ends the process with kExitPeerLost and one line
// naming the rank, the step and the seconds; a timeout of 0 never fires. Margins are wide (a 0.2 s
// deadline against 5 s of work, a 1 s bound on disarming a 60 s one) so a loaded machine cannot flip them.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm/setup_deadline.h"

namespace zero {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(SetupDeadline, WorkInTimeLeavesTheProcessRunningAndDisarmsAtOnce) {
  const auto t0 = Clock::now();
  {
    SetupDeadline d(60, 0, "setting up the test");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // the destructor disarms: it must not wait out the 60 s
  EXPECT_LT(seconds_since(t0), 1.0);

  const auto t1 = Clock::now();
  SetupDeadline d(60, 0, "setting up the test");
  d.done();
  d.done();  // twice, then the destructor: each a no-op after the first
  EXPECT_LT(seconds_since(t1), 1.0);
}

TEST(SetupDeadlineDeathTest, WorkPastTheDeadlineEndsTheProcessNamingRankAndSeconds) {
  // The child runs a thread: re-execute the binary for it rather than fork a process that may hold threads.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        SetupDeadline d(0.2, 3, "the test step did not finish; check THE_SETTING");
        std::this_thread::sleep_for(std::chrono::seconds(5));
      },
      ::testing::ExitedWithCode(kExitPeerLost),
      "^rank 3: error: the test step did not finish; check THE_SETTING \\(no answer after 0\\.2 s; exit code 76\\)\n$");
}

TEST(SetupDeadline, ZeroTimeoutNeverFires) {
  for (double never : {0.0, -1.0}) {
    SetupDeadline d(never, 0, "setting up the test");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  SUCCEED() << "still running";
}

}  // namespace
}  // namespace zero
