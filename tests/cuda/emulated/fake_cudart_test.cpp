// The emulated runtime's memory checks (fake_cudart.cpp): what they promise is what makes the emulated GPU
// tests catch a kernel that runs past its buffers or reads memory nothing wrote.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

TEST(FakeCudartMemory, FreshDeviceMemoryReadsAsNaN) {
  float* f = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&f), 3 * sizeof(float)), cudaSuccess);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(f[i])) << i;
  uint16_t bf16_bits;
  std::memcpy(&bf16_bits, f, 2);
  EXPECT_EQ(bf16_bits, 0xFFFF);  // a bf16 NaN as well
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f) % 256, 0u);
  EXPECT_EQ(cudaFree(f), cudaSuccess);
}

TEST(FakeCudartMemory, BuffersAreAlignedAndTracked) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  cudaPointerAttributes at;
  ASSERT_EQ(cudaPointerGetAttributes(&at, static_cast<char*>(p) + 999), cudaSuccess);
  EXPECT_EQ(at.type, cudaMemoryTypeDevice);
  ASSERT_EQ(cudaPointerGetAttributes(&at, static_cast<char*>(p) + 1000), cudaSuccess);
  EXPECT_NE(at.type, cudaMemoryTypeDevice);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // freed twice
}

using FakeCudartMemoryDeathTest = ::testing::Test;

TEST_F(FakeCudartMemoryDeathTest, ReadPastTheRoundedEndFaults) {
  EXPECT_DEATH(
      {
        float* f = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&f), 64 * sizeof(float));  // exactly 256 bytes
        volatile float x = f[64];
        (void)x;
      },
      "");
}

TEST_F(FakeCudartMemoryDeathTest, ReadBeforeTheBeginningFaults) {
  EXPECT_DEATH(
      {
        char* c = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&c), 8192);
        volatile char x = c[-4097];
        (void)x;
      },
      "");
}

TEST_F(FakeCudartMemoryDeathTest, WriteIntoTheRoundingIsNamedAtFree) {
  EXPECT_DEATH(
      {
        float* f = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&f), 3 * sizeof(float));
        f[3] = 1.0f;  // inside the 256-byte rounding: no fault, but the canary is gone
        cudaFree(f);
      },
      "emulated device buffer .* of 12 bytes: byte 12 outside it was overwritten");
}

TEST_F(FakeCudartMemoryDeathTest, PinnedBuffersAreGuardedToo) {
  EXPECT_DEATH(
      {
        char* c = nullptr;
        cudaMallocHost(reinterpret_cast<void**>(&c), 10);
        c[-1] = 0;
        cudaFreeHost(c);
      },
      "emulated pinned buffer .* of 10 bytes: byte -1 outside it was overwritten");
}

}  // namespace

namespace {

// The hidden wait a real driver may make (fake_cudart.cpp): a copy to or from pageable host memory on a
// stream still waiting on another stream's event is refused; once the host has seen the stream pass that
// wait (an event recorded after it, synchronised), or through pinned memory, it goes.
TEST(FakeCudartStreams, APageableCopyBehindACrossStreamWaitIsRefused) {
  cudaStream_t compute = nullptr, comm = nullptr;
  ASSERT_EQ(cudaStreamCreate(&compute), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&comm), cudaSuccess);
  EXPECT_NE(compute, comm);
  cudaEvent_t collective = nullptr, drained = nullptr;
  ASSERT_EQ(cudaEventCreate(&collective), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&drained), cudaSuccess);
  float* dev = nullptr;
  float* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(float)), cudaSuccess);
  float pageable = 0;
  EXPECT_EQ(cudaMemcpyAsync(&pageable, dev, sizeof(float), cudaMemcpyDeviceToHost, compute), cudaSuccess);  // idle

  ASSERT_EQ(cudaEventRecord(collective, comm), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(compute, collective, 0), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(&pageable, dev, sizeof(float), cudaMemcpyDeviceToHost, compute), cudaErrorNotPermitted);
  EXPECT_EQ(cudaMemcpyAsync(dev, &pageable, sizeof(float), cudaMemcpyHostToDevice, compute), cudaErrorNotPermitted);
  EXPECT_EQ(cudaMemcpyAsync(pinned, dev, sizeof(float), cudaMemcpyDeviceToHost, compute), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(&pageable, dev, sizeof(float), cudaMemcpyDeviceToHost, comm), cudaSuccess);  // not behind
  ASSERT_EQ(cudaEventSynchronize(collective), cudaSuccess);  // the collective, not the compute stream
  EXPECT_EQ(cudaMemcpyAsync(&pageable, dev, sizeof(float), cudaMemcpyDeviceToHost, compute), cudaErrorNotPermitted);
  ASSERT_EQ(cudaEventRecord(drained, compute), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(drained), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(&pageable, dev, sizeof(float), cudaMemcpyDeviceToHost, compute), cudaSuccess);

  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  for (cudaEvent_t e : {collective, drained}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  for (cudaStream_t s : {compute, comm}) EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace

namespace {

// Events as the runtime times them: only two recorded events that were created timing; one made with
// cudaEventDisableTiming (what every event we only wait on is) or never recorded is an invalid handle.
TEST(FakeCudartEvents, OnlyRecordedTimingEventsGiveAnElapsedTime) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t a = nullptr, b = nullptr, untimed = nullptr, unrecorded = nullptr;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&b, cudaEventDefault), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&unrecorded), cudaSuccess);
  for (cudaEvent_t e : {a, b, untimed}) ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(&ms, untimed, b), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, unrecorded), cudaErrorInvalidResourceHandle);
  for (cudaEvent_t e : {a, b, untimed, unrecorded}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
