// The emulated runtime's stream queues and their scheduler (deferred_streams.h).
#include "tests/cuda/emulated/deferred_streams.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "tests/cuda/simt_emulator.h"

namespace zero::fake_cuda {
namespace {

enum class Order { kInline, kFirstStreamAhead, kLastStreamAhead };

Order order() {
  static const Order o = [] {
    const char* v = std::getenv("ZERO_EMULATED_STREAMS");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "inline") == 0) return Order::kInline;
    if (std::strcmp(v, "first") == 0) return Order::kFirstStreamAhead;
    if (std::strcmp(v, "last") == 0) return Order::kLastStreamAhead;
    std::fprintf(stderr, "emulated runtime: ZERO_EMULATED_STREAMS=%s: expected first, last or inline\n", v);
    std::abort();
  }();
  return o;
}

struct Op {
  std::function<void()> run;
  std::function<bool()> ready;  // empty: ready at once
};
struct Queue {
  int place = 0;  // creation order
  std::deque<Op> ops;
};
struct Scheduler {
  std::recursive_mutex mu;  // one host thread drives the device at a time; a drain holds it throughout
  std::map<cudaStream_t, Queue> queues;
  int created = 0;
  Queue& queue(cudaStream_t s) {
    auto [it, fresh] = queues.try_emplace(s);
    if (fresh) it->second.place = created++;
    return it->second;
  }
};
Scheduler& scheduler() {
  static Scheduler s;
  return s;
}

// The queue whose head runs next: by creation order, first or last ahead, the first whose head is ready.
Queue* next_runnable(Scheduler& sch) {
  Queue* pick = nullptr;
  for (auto& [stream, q] : sch.queues) {
    if (q.ops.empty() || (q.ops.front().ready && !q.ops.front().ready())) continue;
    const bool ahead = pick == nullptr || (order() == Order::kFirstStreamAhead ? q.place < pick->place
                                                                                : q.place > pick->place);
    if (ahead) pick = &q;
  }
  return pick;
}

void defer_launch(cudaStream_t s, std::function<void()> work) { enqueue(s, std::move(work)); }

// Under deferral, kernel launches queue on their streams too (simt::on_stream).
const bool launches_deferred = [] {
  if (deferring()) simt::set_stream_deferral(&defer_launch);
  return deferring();
}();

}  // namespace

bool deferring() { return order() != Order::kInline; }

void enqueue(cudaStream_t s, std::function<void()> run, std::function<bool()> ready) {
  if (!deferring()) {
    run();
    return;
  }
  if (s == nullptr) {  // the legacy stream: after everything queued, and before anything queued later
    drain_all();
    run();
    return;
  }
  Scheduler& sch = scheduler();
  std::lock_guard<std::recursive_mutex> lock(sch.mu);
  sch.queue(s).ops.push_back(Op{std::move(run), std::move(ready)});
}

void run_until(const std::function<bool()>& done, const char* what) {
  Scheduler& sch = scheduler();
  std::lock_guard<std::recursive_mutex> lock(sch.mu);
  while (!done()) {
    Queue* q = next_runnable(sch);
    if (q == nullptr) {
      std::fprintf(stderr, "emulated runtime (deferred streams): %s can never complete: nothing queued can run\n",
                   what);
      std::abort();
    }
    Op op = std::move(q->ops.front());
    q->ops.pop_front();
    op.run();
  }
}

void drain_stream(cudaStream_t s) {
  if (!deferring()) return;
  Scheduler& sch = scheduler();
  std::lock_guard<std::recursive_mutex> lock(sch.mu);
  Queue& q = sch.queue(s);
  run_until([&q] { return q.ops.empty(); }, "a stream synchronisation");
}

void drain_all() {
  if (!deferring()) return;
  Scheduler& sch = scheduler();
  std::lock_guard<std::recursive_mutex> lock(sch.mu);
  run_until(
      [&sch] {
        for (const auto& [stream, q] : sch.queues)
          if (!q.ops.empty()) return false;
        return true;
      },
      "a device synchronisation");
}

void stream_created(cudaStream_t s) {
  Scheduler& sch = scheduler();
  std::lock_guard<std::recursive_mutex> lock(sch.mu);
  sch.queue(s);
}

void stream_destroyed(cudaStream_t s) {
  drain_stream(s);
  Scheduler& sch = scheduler();
  std::lock_guard<std::recursive_mutex> lock(sch.mu);
  sch.queues.erase(s);
}

}  // namespace zero::fake_cuda
