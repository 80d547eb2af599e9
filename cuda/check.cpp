// Formatting of CUDA / NCCL / cuBLAS failures (see check.h).
#include "cuda/check.h"

#include <mpi.h>

#include <cstdio>
#include <string>

#include "core/check.h"
#include "core/host_name.h"

namespace zero {
namespace {
std::string gpu_error_message(const char* file, int line, const char* call, const char* library, int code,
                              const char* what) {
  int rank = -1, inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int device = -1;
  cudaGetDevice(&device);  // best effort: -1 when even this fails
  return fmt::format("{}:{}: rank {} on {} (device {}): {} failed: {} error {}: {}", file, line, rank, host_name(), device,
                     call, library, code, what ? what : "(no message)");
}
}  // namespace

void throw_gpu_error(const char* file, int line, const char* call, const char* library, int code, const char* what) {
  throw Error(gpu_error_message(file, line, call, library, code, what));
}

void report_gpu_error(const char* file, int line, const char* call, const char* library, int code,
                      const char* what) {
  fprintf(stderr, "zero: %s\n", gpu_error_message(file, line, call, library, code, what).c_str());
}

}  // namespace zero
