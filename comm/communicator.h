// The Communicator: collectives over host (MPI) or device (NCCL) buffers, with counters and an
// optional ordered log. Counts are elements, never bytes. The public calls are non-virtual so the
// counting convention lives in one place; backends implement the do_* hooks.
//
// In-place rules: all_reduce is always in place. reduce_scatter reads `send` (world * recv_count
// elements, rank-major) and writes `recv` (recv_count); they must not overlap. all_gather reads
// `send` (send_count) and writes `recv` (world * send_count, rank-major); `send` may be exactly
// recv + rank * send_count (in place), no other overlap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace zero {

class PeerWatch;  // comm/peer_watch.h

enum class ReduceOp : uint8_t { Sum, Max, Min };
enum class Collective : uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, ScalarAllReduce, Count };
const char* collective_name(Collective c);

// A started non-blocking collective. wait() completes it; destroying an unfinished handle waits.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;  // true once complete (and drives progress)
  // Orders later work on the backend's compute queue after this collective without blocking the host
  // (NCCL: the compute stream waits on the collective's event). A host backend has no queue, so it
  // waits. After it the request counts as complete for its owner.
  virtual void enqueue_wait() { wait(); }
};
using CommHandle = std::unique_ptr<CommRequest>;

struct CollectiveCounter {
  uint64_t calls = 0;
  uint64_t elements = 0;  // see the counting convention in comm_report()
};

// Counting convention (DESIGN.md §2): reduce-scatter and all-gather count the full (unsharded)
// element count, an all-reduce counts twice its count, scalar reductions are counted apart.
struct CommReport {
  CollectiveCounter by[static_cast<size_t>(Collective::Count)];
  uint64_t barriers = 0;
  const CollectiveCounter& of(Collective c) const { return by[static_cast<size_t>(c)]; }
  uint64_t bulk_elements() const;  // all-reduce + reduce-scatter + all-gather
};

struct CommEvent {
  Collective op;
  uint64_t elements;  // counted as in CommReport
  std::string label;  // what the caller said it was (e.g. "rs bucket 3")
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual const char* backend_name() const = 0;
  // Which reduction dtypes this backend can sum on the wire.
  virtual bool supports_reduction(DType t) const = 0;

  CommHandle all_reduce_async(void* buf, size_t count, DType t, ReduceOp op, const char* label = "");
  CommHandle reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op,
                                  const char* label = "");
  CommHandle all_gather_async(const void* send, void* recv, size_t send_count, DType t, const char* label = "");
  void all_reduce(void* buf, size_t count, DType t, ReduceOp op) { all_reduce_async(buf, count, t, op)->wait(); }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) {
    reduce_scatter_async(send, recv, recv_count, t, op)->wait();
  }
  void all_gather(const void* send, void* recv, size_t send_count, DType t) {
    all_gather_async(send, recv, send_count, t)->wait();
  }
  void broadcast(void* buf, size_t count, DType t, int root);
  void barrier();
  // Small host reductions (norms, finite flags), blocking, in place.
  void all_reduce_scalars(double* vals, size_t n, ReduceOp op);

  const CommReport& report() const { return report_; }
  void reset_report() { report_ = {}; log_.clear(); }
  void set_logging(bool on) { logging_ = on; }
  const std::vector<CommEvent>& log() const { return log_; }
  // The PeerWatch its waits go through (comm/peer_watch.h; null for a backend without one). Communicators made
  // later over part of the same job take it (make_hybrid_communicators, the CUDA backend's NCCL), so one watch
  // serves every wait of the job: a verdict names ranks as the job numbers them, and a rank waiting in any of
  // them answers a question asked from another.
  const std::shared_ptr<PeerWatch>& shared_peer_watch() const { return watch_; }
  // Which ranks this communicator joins, when it is not the whole job (hybrid sharding's "shard group" and
  // "replicas", comm/hybrid_groups.h): added to the description of a wait that does not end, so a verdict
  // over the whole job (comm/peer_watch.h) says which ring each rank waited in.
  void set_scope(std::string scope) { scope_ = std::move(scope); }

  // How long a wait for peers may last before the job ends naming the ranks that did not come
  // (comm/peer_watch.h); 0 = wait forever (the default).
  void set_peer_timeout(double seconds) { peer_timeout_s_ = seconds; }
  double peer_timeout() const { return peer_timeout_s_; }
  // A scope in which one rank may legitimately keep the others waiting long (rank 0 tokenizing the data,
  // checkpoint writes: work without poll points, see peer_watch.h): waits get `seconds` instead (0 =
  // forever), on every communicator named (a run's MPI world and its engine's NCCL one; null ones are
  // skipped). Every rank enters the same scopes, as they issue the same collectives.
  class SlowPhase {
   public:
    SlowPhase(Communicator& c, double seconds) : SlowPhase({&c}, seconds) {}
    SlowPhase(std::initializer_list<Communicator*> comms, double seconds) {
      for (Communicator* c : comms)
        if (c) saved_.push_back({c, std::exchange(c->peer_timeout_s_, seconds)});
    }
    ~SlowPhase() {
      for (auto& [c, s] : saved_) c->peer_timeout_s_ = s;
    }
    SlowPhase(const SlowPhase&) = delete;
    SlowPhase& operator=(const SlowPhase&) = delete;

   private:
    std::vector<std::pair<Communicator*, double>> saved_;
  };

 protected:
  // The collective being started (set before each do_* hook), for messages about a wait that does not end:
  // its number on this communicator (1 = the first) and "name 'label'" (and " (scope)" when set).
  uint64_t op_sequence() const { return op_seq_; }
  const std::string& op_description() const { return op_what_; }

  std::shared_ptr<PeerWatch> watch_;  // set by the backend's constructor (see shared_peer_watch)

  virtual CommHandle do_all_reduce(void* buf, size_t count, DType t, ReduceOp op) = 0;
  virtual CommHandle do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) = 0;
  virtual CommHandle do_all_gather(const void* send, void* recv, size_t send_count, DType t) = 0;
  virtual void do_broadcast(void* buf, size_t count, DType t, int root) = 0;
  virtual void do_barrier() = 0;
  virtual void do_all_reduce_scalars(double* vals, size_t n, ReduceOp op) = 0;

 private:
  void count(Collective c, uint64_t elements, const char* label);
  CommReport report_;
  double peer_timeout_s_ = 0;
  uint64_t op_seq_ = 0;
  std::string op_what_;
  std::string scope_;
  bool logging_ = false;
  std::vector<CommEvent> log_;
};

// A completed request (for single-rank shortcuts and blocking backends).
CommHandle completed_request();

}  // namespace zero
