// The CUDA backend's StepClock (cuda/event_step_clock.h): a scope gets the stream's time, not the host's.
// Device work of a known host-measured duration (memsets of a large buffer, timed with a host sync) is
// queued inside scopes; the clock must report it within a factor of the host's figure, its scopes must
// not block the host (queueing returns long before the work ends, and the host's time in the scopes is that
// queueing, not the stream's), nested scopes must count exclusively,
// and a second window (the event pool reused) must agree with the first.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>

#include "cuda/event_step_clock.h"
#include "cuda_test_util.h"

namespace zero {
namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(EventStepClock, TimesTheStreamWithoutBlockingTheHost) {
  ZERO_SKIP_WITHOUT_CUDA();
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t bytes = size_t(512) << 20;
  void* buf = nullptr;
  CUDA_CHECK(cudaMalloc(&buf, bytes));
  const int reps = 40;  // ~20 GB written: tens of milliseconds on any data-centre GPU
  auto work = [&](int n) {
    for (int i = 0; i < n; ++i) CUDA_CHECK(cudaMemsetAsync(buf, i & 0xff, bytes, s));
  };
  work(2);  // warm-up
  CUDA_CHECK(cudaStreamSynchronize(s));
  auto t0 = std::chrono::steady_clock::now();
  work(reps);
  CUDA_CHECK(cudaStreamSynchronize(s));
  const double host_s = since(t0);

  auto clock = make_event_step_clock(s);
  for (int window = 0; window < 2; ++window) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    t0 = std::chrono::steady_clock::now();
    clock->enter(TimeCategory::Optimizer);
    work(reps / 2);
    clock->enter(TimeCategory::Comm);  // nested: its work counts to comm only
    work(reps / 2);
    clock->leave();
    clock->leave();
    const double queued_s = since(t0);
    const StepTimes t = clock->take();
    const double opt = t.of(TimeCategory::Optimizer), comm = t.of(TimeCategory::Comm);
    EXPECT_LT(queued_s, 0.5 * host_s) << "the scopes waited for the stream";
    // The host's time in the scopes is its queueing, apart from the stream's.
    EXPECT_TRUE(t.device_timed);
    EXPECT_LE(t.host_of(TimeCategory::Optimizer) + t.host_of(TimeCategory::Comm), queued_s);
    EXPECT_GT(t.host_of(TimeCategory::Optimizer), 0.0);
    EXPECT_GT(opt + comm, 0.7 * host_s);
    EXPECT_LT(opt + comm, 1.3 * host_s);
    EXPECT_GT(opt, 0.3 * host_s);
    EXPECT_GT(comm, 0.3 * host_s);
    EXPECT_EQ(t.of(TimeCategory::Gemm), 0.0);
    EXPECT_EQ(t.calls_of(TimeCategory::Optimizer), 1u);
    EXPECT_EQ(t.calls_of(TimeCategory::Comm), 1u);
  }
  clock.reset();
  CUDA_CHECK(cudaFree(buf));
  CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace
}  // namespace zero
