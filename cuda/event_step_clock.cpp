#include "cuda/event_step_clock.h"

#include <vector>

#include "cuda/check.h"
#include "cuda/launch_count.h"

namespace zero {
namespace {

class EventStepClock final : public StepClock {
 public:
  EventStepClock(cudaStream_t stream, HostWaitGuard guard)
      : StepClock(true), stream_(stream), waiter_(stream, std::move(guard)) {}
  ~EventStepClock() override {
    for (cudaEvent_t e : events_) CUDA_WARN(cudaEventDestroy(e));
  }
  EventStepClock(const EventStepClock&) = delete;
  EventStepClock& operator=(const EventStepClock&) = delete;

 protected:
  void record(size_t i) override {
    if (i == events_.size()) {  // the pool grows during the first (largest) window only
      cudaEvent_t e = nullptr;
      CUDA_CHECK(cudaEventCreate(&e));  // with timing: these events exist to be timed
      events_.push_back(e);
    }
    CUDA_CHECK(cudaEventRecord(events_[i], stream_));
  }

  uint64_t launches_now() const override { return cuda_launch::total(); }

  void resolve(std::span<double> gaps) override {
    // Events on one stream complete in order: once the last is done, every gap can be read.
    waiter_.wait(events_[gaps.size()]);
    for (size_t i = 0; i < gaps.size(); ++i) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      gaps[i] = double(ms) * 1e-3;
    }
  }

 private:
  cudaStream_t stream_;
  StreamWaiter waiter_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

std::unique_ptr<StepClock> make_event_step_clock(cudaStream_t stream, HostWaitGuard guard) {
  return std::make_unique<EventStepClock>(stream, std::move(guard));
}

}  // namespace zero
