// SetupDeadline: a deadline over a set-up step that blocks inside a library call with no poll point of
// ours (the ncclUniqueId broadcast, ncclCommInitRank, NCCL's lazy connection set-up at the first
// collective), so a bad network setting ends the job with a message naming what to check instead of
// hanging silently. PeerWatch cannot cover such a step: it polls, and these calls do not return.
//
// A thread waits on a condition variable until the step is done (done() or the destructor, which return
// at once) or the deadline passes; then it prints one line to stderr and ends the process with
// kExitPeerLost. It calls no MPI (MPI may be initialised without thread support) and runs no destructors
// (_Exit): the main thread is stuck inside the library and its state is unknown. The launcher (mpirun,
// srun) sees the rank leave and ends the others, which may be stuck in the same step.
//
// Header-only on purpose: NcclCommunicator is built into pmtrain's CUDA backend module, which takes comm
// code from the executable (pmtrain/CMakeLists.txt); pmtrain itself never arms a deadline, so an
// out-of-line definition would be missing from it and the module would not load. Nothing here has state
// that must exist once.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "comm/peer_watch.h"  // kExitPeerLost

namespace zero {

class SetupDeadline {
 public:
  // timeout_s <= 0: never fires (no thread). message: what is being set up and what to check.
  SetupDeadline(double timeout_s, int rank, std::string message) {
    if (!(timeout_s > 0)) return;
    // A duration past ~292 years overflows steady_clock's nanoseconds; a year is never.
    const std::chrono::duration<double> limit(std::min(timeout_s, 3.2e7));
    thread_ = std::thread([this, limit, timeout_s, rank, message = std::move(message)] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (disarmed_.wait_for(lock, limit, [this] { return done_; })) return;
      std::fprintf(stderr, "rank %d: error: %s (no answer after %g s; exit code %d)\n", rank, message.c_str(),
                   timeout_s, kExitPeerLost);
      std::fflush(stderr);
      std::_Exit(kExitPeerLost);
    });
  }
  ~SetupDeadline() { done(); }
  SetupDeadline(const SetupDeadline&) = delete;
  SetupDeadline& operator=(const SetupDeadline&) = delete;

  // The step finished: the deadline will not fire. Returns at once (wakes the thread and joins it).
  void done() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    disarmed_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable disarmed_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

}  // namespace zero
