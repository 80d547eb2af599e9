// The emulated runtime's one hook beyond the CUDA API: memory another library allocated "on the device".
// On a GPU, torch's CUDA tensors are device memory that cudaPointerGetAttributes reports as such; under the
// emulation torch has no device, so the emulated zero_torch binding (python/zero_torch, built with
// ZERO_TORCH_EMULATED) lends the caller's host tensors to the fake runtime for the length of one transfer:
// while lent, a range is device memory to cudaPointerGetAttributes (CudaOps' device checks pass, as for
// torch's tensors on a GPU), and nothing else changes (it is not guarded, counted or freed by the fake).
#pragma once
#include <cstddef>

extern "C" {
void zero_fake_cuda_lend(const void* p, size_t bytes);
void zero_fake_cuda_unlend(const void* p);  // p as lent; lending p again before that is an error
}
