// The emulated runtime's deferred streams (deferred_streams.h), run under ZERO_EMULATED_STREAMS=first and
// =last (CMakeLists.txt): queued work waits for the host to need it, runs in the order the variable names,
// and the calls that CUDA documents as synchronising (or staging) do so. The expectations are CUDA's
// documented semantics, written out as literal values; what the two orders do differently is the point.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda/simt_emulator.h"

namespace {

// The kernel of the launch test: thread i adds one to p[i].
void add_one(float* p) { p[threadIdx.x] += 1.0f; }

std::string order() {
  const char* v = std::getenv("ZERO_EMULATED_STREAMS");
  return v ? v : "";
}

class DeferredStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(order() == "first" || order() == "last") << "run under ZERO_EMULATED_STREAMS=first or last";
    ASSERT_EQ(cudaStreamCreate(&a_), cudaSuccess);  // created first
    ASSERT_EQ(cudaStreamCreate(&b_), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev_), 4 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned_), 4 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemset(dev_, 0, 4 * sizeof(float)), cudaSuccess);
    for (int i = 0; i < 4; ++i) pinned_[i] = -1.0f;
  }
  void TearDown() override {
    cudaFree(dev_);
    cudaFreeHost(pinned_);
    cudaStreamDestroy(a_);
    cudaStreamDestroy(b_);
  }
  // dev_[0..3] = v, queued on s (a byte pattern a float reads back exactly: 0x3f3f3f3f).
  void fill(cudaStream_t s) { ASSERT_EQ(cudaMemsetAsync(dev_, 0x3f, 4 * sizeof(float), s), cudaSuccess); }
  static float filled() {
    float v;
    std::memset(&v, 0x3f, sizeof v);
    return v;
  }
  cudaStream_t a_ = nullptr, b_ = nullptr;
  float* dev_ = nullptr;
  float* pinned_ = nullptr;
};

TEST_F(DeferredStreams, QueuedWorkRunsWhenTheHostSynchronises) {
  fill(a_);
  ASSERT_EQ(cudaMemcpyAsync(pinned_, dev_, 4 * sizeof(float), cudaMemcpyDeviceToHost, a_), cudaSuccess);
  EXPECT_EQ(pinned_[0], -1.0f);  // a pinned destination: the copy has not run yet
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(pinned_[0], filled());
}

TEST_F(DeferredStreams, AKernelLaunchIsQueuedWithItsArguments) {
  zero::simt::launch_on(a_, 1, 4, 0, add_one, dev_);
  zero::simt::launch_on(a_, 1, 4, 0, add_one, dev_);
  EXPECT_EQ(dev_[2], 0.0f);
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(dev_[2], 2.0f);
}

TEST_F(DeferredStreams, AnEventWaitOrdersTheStreams) {
  cudaEvent_t filled_ev;
  ASSERT_EQ(cudaEventCreateWithFlags(&filled_ev, cudaEventDisableTiming), cudaSuccess);
  fill(a_);
  ASSERT_EQ(cudaEventRecord(filled_ev, a_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b_, filled_ev, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned_, dev_, 4 * sizeof(float), cudaMemcpyDeviceToHost, b_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  EXPECT_EQ(pinned_[3], filled());  // in either order: the wait holds b's copy behind a's fill
  cudaEventDestroy(filled_ev);
}

// Without the wait, the order decides: `first` runs stream a (made first) as far ahead as it can, `last`
// runs b's copy before a's fill, so the copy reads the old zeros: the race a GPU shows only by chance.
TEST_F(DeferredStreams, WithoutTheWaitTheOrderDecides) {
  fill(a_);
  ASSERT_EQ(cudaMemcpyAsync(pinned_, dev_, 4 * sizeof(float), cudaMemcpyDeviceToHost, b_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  EXPECT_EQ(pinned_[0], order() == "first" ? filled() : 0.0f);
  // `last` left a's fill queued: the device synchronisation runs it.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(dev_[0], filled());
}

TEST_F(DeferredStreams, AQueryRunsWhatTheEventNeedsAndTimesAreReadyOnlyThen) {
  cudaEvent_t start, end;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, a_), cudaSuccess);
  fill(a_);
  ASSERT_EQ(cudaEventRecord(end, a_), cudaSuccess);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  EXPECT_EQ(dev_[1], 0.0f);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);
  EXPECT_EQ(dev_[1], filled());
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  cudaEventDestroy(start);
  cudaEventDestroy(end);
}

// From pageable memory the runtime stages the source before it returns (the host may reuse it at once);
// into pageable memory it returns when the copy is done.
TEST_F(DeferredStreams, PageableCopiesStageTheSourceAndCompleteTheDestination) {
  std::vector<float> host(4, 5.0f);
  ASSERT_EQ(cudaMemcpyAsync(dev_, host.data(), 4 * sizeof(float), cudaMemcpyHostToDevice, a_), cudaSuccess);
  host.assign(4, 6.0f);
  std::vector<float> back(4, 0.0f);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), dev_, 4 * sizeof(float), cudaMemcpyDeviceToHost, a_), cudaSuccess);
  EXPECT_EQ(back[0], 5.0f);
}

// The legacy stream's calls (cudaMemcpy, cudaMemset) and cudaFree come after everything queued.
TEST_F(DeferredStreams, SynchronousCallsRunEverythingQueuedFirst) {
  fill(a_);
  float host[4] = {};
  ASSERT_EQ(cudaMemcpy(host, dev_, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0], filled());
  ASSERT_EQ(cudaMemsetAsync(dev_, 0, 4 * sizeof(float), b_), cudaSuccess);
  ASSERT_EQ(cudaMemset(dev_, 0x3f, sizeof(float)), cudaSuccess);  // after b's zeros, not before
  EXPECT_EQ(dev_[0], filled());
  EXPECT_EQ(dev_[1], 0.0f);
}

}  // namespace
