// MPI_CHECK: turn an MPI error code into a zero::Error naming the call, the rank and MPI's message.
#pragma once
#include <mpi.h>

#include <string>

namespace zero {
[[noreturn]] void throw_mpi_error(const char* file, int line, const char* call, int code);
}

#define MPI_CHECK(call)                                                          \
  do {                                                                           \
    int mpi_rc_ = (call);                                                        \
    if (mpi_rc_ != MPI_SUCCESS) ::zero::throw_mpi_error(__FILE__, __LINE__, #call, mpi_rc_); \
  } while (0)
