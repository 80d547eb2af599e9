#include "cuda/launch_count.h"

#include <atomic>

namespace zero::cuda_launch {
namespace {
std::atomic<uint64_t> launches{0};
}  // namespace

void count() { launches.fetch_add(1, std::memory_order_relaxed); }
uint64_t total() { return launches.load(std::memory_order_relaxed); }

}  // namespace zero::cuda_launch
