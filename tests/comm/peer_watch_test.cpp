// The peer watch (comm/peer_watch.h) at the MPI boundary: one rank never enters a collective (it
// sleeps), the others wait under a deadline; the verdict, made from who answered on the watch's own
// communicator, must name exactly that rank. Only rank 0 has a deadline, so the other waiting ranks
// prove that a rank waiting with no deadline of its own answers (and reports) when asked.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "comm/hybrid_groups.h"
#include "comm/mpi_communicator.h"
#include "comm/peer_watch.h"

namespace zero {
namespace {

using Clock = std::chrono::steady_clock;

struct VerdictThrown {
  PeerVerdict v;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(PeerWatch, NamesTheRankThatNeverArrives) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int W = comm.world(), R = comm.rank();
  const int stuck = W > 2 ? 2 : 1;
  comm.peer_watch().set_verdict_handler([](const PeerVerdict& v) { throw VerdictThrown{v}; });
  comm.peer_watch().set_grace(1.0);
  comm.set_peer_timeout(R == 0 ? 1.0 : 0.0);  // rank 0 asks; the others only answer

  comm.barrier();  // collective #1
  double x = R + 1;
  const auto t0 = Clock::now();
  if (R == stuck) {
    // Stopped for longer than rank 0's deadline plus the grace period; then it joins, polling with
    // test() (which serves no questions: the others have already made their verdict).
    std::this_thread::sleep_for(std::chrono::seconds(4));
    auto h = comm.all_reduce_async(&x, 1, DType::F64, ReduceOp::Sum, "probe");
    while (!h->test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } else {
    auto h = comm.all_reduce_async(&x, 1, DType::F64, ReduceOp::Sum, "probe");  // collective #2
    bool thrown = false;
    try {
      h->wait();
    } catch (const VerdictThrown& t) {
      thrown = true;
      const double took = seconds_since(t0);
      EXPECT_LT(took, 3.5) << "the verdict came after the stuck rank woke up";
      EXPECT_EQ(t.v.reporter, R);
      EXPECT_EQ(t.v.missing, std::vector<int>{stuck});
      std::vector<int> alive;
      for (int r = 0; r < W; ++r)
        if (r != stuck) alive.push_back(r);
      EXPECT_EQ(t.v.alive, alive);
      for (const WaitInfo& w : t.v.alive_at) {
        EXPECT_EQ(w.seq, 2u);
        EXPECT_EQ(w.what, "all_reduce 'probe'");
      }
      EXPECT_GE(t.v.waited_s, 1.0);  // rank 0's wait, reported by every rank
      const std::string msg = t.v.describe();
      EXPECT_NE(msg.find("rank " + std::to_string(stuck) + " did not reach all_reduce 'probe' #2"), std::string::npos)
          << msg;
    }
    EXPECT_TRUE(thrown) << "no verdict although rank " << stuck << " never arrived";
    comm.set_peer_timeout(0);
    while (!h->test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(x, W * (W + 1) / 2.0);  // the collective itself still completes once everyone is there
  MPI_Barrier(MPI_COMM_WORLD);
}

// Hybrid sharding (comm/hybrid_groups.h): the last rank never arrives; its shard-group partner waits in the
// shard group's all-reduce, the others (past theirs) in the replicas'. Every verdict must name the stopped rank
// by its rank in the job, with every other rank alive, each where it waits, although rank 0's deadline ran out
// in a ring the stopped rank's partner is not waiting in. (With a watch per ring, rank 0's over the replicas
// {0, 2} named "rank 1", its ring-local number for rank 2, which was alive and waiting in the other ring.)
TEST(PeerWatch, HybridShardingNamesTheJobRankWhicheverRingTheOthersWaitIn) {
  int W = 1, R = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &R);
  const int S = W / 2, stuck = W - 1;  // at 4 ranks: groups {0, 1} {2, 3}, replicas {0, 2} {1, 3}
  MpiCommunicator job(MPI_COMM_WORLD);  // as pmtrain: the run's communicator, whose watch both rings share
  auto [shard, replicas] = make_hybrid_communicators<MpiCommunicator>(MPI_COMM_WORLD, S, job.shared_peer_watch());
  ASSERT_EQ(&shard->peer_watch(), &job.peer_watch()) << "one watch over the job for every communicator";
  ASSERT_EQ(&replicas->peer_watch(), &job.peer_watch());
  shard->peer_watch().set_verdict_handler([](const PeerVerdict& v) { throw VerdictThrown{v}; });
  shard->peer_watch().set_grace(1.0);
  for (Communicator* c : {static_cast<Communicator*>(shard.get()), static_cast<Communicator*>(replicas.get())})
    c->set_peer_timeout(R == 0 ? 1.0 : 0.0);  // rank 0 asks; the others only answer
  MPI_Barrier(MPI_COMM_WORLD);

  double a = R + 1, b = R + 1;
  const auto t0 = Clock::now();
  auto finish = [](CommHandle& h) {  // test() serves no questions: the verdict is made by then
    while (!h->test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  CommHandle in_group, across;
  if (R == stuck) {
    std::this_thread::sleep_for(std::chrono::seconds(4));  // past rank 0's deadline and the grace period
    in_group = shard->all_reduce_async(&a, 1, DType::F64, ReduceOp::Sum, "probe");
    finish(in_group);
    across = replicas->all_reduce_async(&b, 1, DType::F64, ReduceOp::Sum, "probe");
    finish(across);
  } else {
    bool thrown = false;
    in_group = shard->all_reduce_async(&a, 1, DType::F64, ReduceOp::Sum, "probe");
    try {
      in_group->wait();
      across = replicas->all_reduce_async(&b, 1, DType::F64, ReduceOp::Sum, "probe");
      across->wait();
    } catch (const VerdictThrown& t) {
      thrown = true;
      EXPECT_LT(seconds_since(t0), 3.5) << "the verdict came after the stuck rank woke up";
      EXPECT_EQ(t.v.reporter, R);
      EXPECT_EQ(t.v.missing, std::vector<int>{stuck});
      std::vector<int> alive;
      for (int r = 0; r < W; ++r)
        if (r != stuck) alive.push_back(r);
      ASSERT_EQ(t.v.alive, alive);
      for (size_t i = 0; i < alive.size(); ++i) {
        const bool partner = S > 1 && alive[i] / S == stuck / S;  // stuck in its own group's all-reduce
        EXPECT_EQ(t.v.alive_at[i].what, partner ? "all_reduce 'probe' (shard group)" : "all_reduce 'probe' (replicas)")
            << "rank " << alive[i];
      }
      const std::string msg = t.v.describe();
      EXPECT_NE(msg.find("rank " + std::to_string(stuck) + " did not reach all_reduce 'probe' ("), std::string::npos)
          << msg;
    }
    EXPECT_TRUE(thrown) << "no verdict although rank " << stuck << " never arrived";
    shard->set_peer_timeout(0);
    replicas->set_peer_timeout(0);
    finish(in_group);
    if (!across) across = replicas->all_reduce_async(&b, 1, DType::F64, ReduceOp::Sum, "probe");
    finish(across);
  }
  // Both rings still complete once everyone is there: the group's sum, then the replicas' of the same slot.
  const int first = S * (R / S);
  EXPECT_EQ(a, S * (2 * first + S + 1) / 2.0);
  double slots = 0;
  for (int r = R % S; r < W; r += S) slots += r + 1;
  EXPECT_EQ(b, slots);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(PeerWatch, ALateRankWithinTheDeadlineIsNoVerdict) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  comm.peer_watch().set_verdict_handler([](const PeerVerdict& v) { throw VerdictThrown{v}; });
  comm.set_peer_timeout(5.0);
  if (comm.rank() == comm.world() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double x = 1;
  EXPECT_NO_THROW(comm.all_reduce_scalars(&x, 1, ReduceOp::Sum));
  EXPECT_EQ(x, comm.world());
}

TEST(PeerVerdict, DescribesMissingRanksAndWhereTheOthersWaited) {
  PeerVerdict v;
  v.reporter = 0;
  v.waited_s = 10;
  v.waiting = {7, "barrier"};
  v.alive = {0, 3};
  v.alive_at = {{7, "barrier"}, {6, "all_reduce 'x'"}};
  v.missing = {1, 2};
  EXPECT_EQ(v.describe(),
            "ranks 1, 2 did not reach barrier #7 within 10.0 s (stopped, dead, or busy elsewhere); waiting: rank 0 "
            "in barrier #7, rank 3 in all_reduce 'x' #6; aborting");
  v.missing = {};
  v.alive_at[1] = {7, "barrier"};
  EXPECT_EQ(v.describe(),
            "every rank answered but the collective did not complete (ranks 0, 3 waited there: collectives out of "
            "order?) after 10.0 s; aborting");
}

}  // namespace
}  // namespace zero
