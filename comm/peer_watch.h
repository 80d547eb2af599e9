// PeerWatch: every wait for peers (an MPI request, a CUDA event behind an NCCL collective) polls under a
// deadline instead of blocking forever, so a dead or stopped rank ends the job with a message naming it.
//
// When a wait passes its deadline, the rank cannot ask the stuck rank what is wrong, so it asks everyone
// else: on a communicator of its own (duplicated at start-up, so nothing the collectives send can match
// it) it sends "alive, waiting in collective #n" to every other rank and collects the others' for a grace
// period. Every rank that is itself waiting anywhere checks for such a message at its poll points and
// answers at once, so a live rank is never named; the ranks that stay silent are (stopped, dead, or busy
// elsewhere for longer than the timeout). The lowest live rank prints the verdict, the others print theirs
// only if it has not ended the job a few seconds later, and every rank leaves through MPI_Abort with
// kExitPeerLost.
//
// One watch may serve several communicators (hybrid sharding's shard group and replicas share one over the
// whole job, comm/hybrid_groups.h): its ranks are then the job's, so a verdict names the rank a user
// launched, and a rank waiting in either communicator answers a question asked from the other.
//
// Phases where one rank legitimately keeps the others waiting long (rank 0 tokenizing, checkpoint
// writes) are not served at poll points (their work has none); the caller widens the deadline for them
// with Communicator::SlowPhase instead, so a rank stopped there is still found, only later.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace zero {

// The exit code of a job ended because a peer stopped answering (distinct from errors, 1, and the
// signal stop, 75).
constexpr int kExitPeerLost = 76;

// What a wait is for, for the message.
struct WaitInfo {
  uint64_t seq = 0;      // the collective's number on this communicator (1 = the first)
  std::string what;      // e.g. "all_reduce 'rs bucket 3'"
};

// What the exchange found: who answered (and where each was waiting), who did not.
struct PeerVerdict {
  int reporter = 0;          // the rank that made this verdict
  double waited_s = 0;       // how long it waited before asking
  WaitInfo waiting;          // where it was waiting
  std::vector<int> alive;    // ranks that answered, the reporter included, ascending
  std::vector<WaitInfo> alive_at;  // where each alive rank was waiting (same order)
  std::vector<int> missing;  // ranks that did not answer, ascending
  std::string describe() const;  // one line naming the missing ranks
};

class PeerWatch {
 public:
  explicit PeerWatch(MPI_Comm comm);  // duplicates comm (collective over it)
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Polls done() until it returns true. Past timeout_s (0 = never), or as soon as another rank asks
  // whether we are alive, runs give_up() (e.g. ncclCommAbort; may be empty), the exchange, and then the
  // verdict handler. done() may throw (an MPI error); that propagates.
  void wait(const std::function<bool()>& done, const WaitInfo& info, double timeout_s,
            const std::function<void()>& give_up = {});

  // What happens with a verdict. The default prints it (the lowest live rank first) and calls MPI_Abort
  // with kExitPeerLost; tests install one that throws. It must not return.
  using VerdictHandler = std::function<void(const PeerVerdict&)>;
  void set_verdict_handler(VerdictHandler h) { handler_ = std::move(h); }
  // How long the exchange collects answers (seconds).
  void set_grace(double s) { grace_s_ = s; }

 private:
  PeerVerdict exchange(const WaitInfo& info, double waited_s);
  bool peer_asked();  // a peer's announcement is waiting to be read
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
  bool oversubscribed_ = false;  // more ranks on this node than cores: long waits sleep
  double grace_s_ = 3.0;
  VerdictHandler handler_;
};

// The default verdict handler: print (lowest live rank at once, the others after a pause), then abort.
[[noreturn]] void report_and_abort(const PeerVerdict& v);

}  // namespace zero
