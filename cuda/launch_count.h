// The work items this process has queued on CUDA streams from our own code: each kernel launch of a kernel file
// (ZERO_LAUNCH, cuda/kernel_launch.cuh), each device memset / memcpy they queue and each cuBLASLt matmul call counts
// one (cuBLASLt may run more than one kernel inside a call; NCCL's collectives and the runtime's own copies are not
// counted). The event step clock reads it at every scope boundary, so each op has its launches beside its host
// time: host time over launches is what a launch costs the host, and an op of many small launches is the one to
// fuse or put in a CUDA graph. Host code only; no CUDA header.
#pragma once
#include <cstdint>

namespace zero::cuda_launch {

void count();       // one more launch (relaxed atomic: any host thread may launch)
uint64_t total();  // since the process started

}  // namespace zero::cuda_launch
