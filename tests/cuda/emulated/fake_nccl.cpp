// The NCCL calls of cuda/nccl_communicator.cpp, implemented over MPI for the emulated backend: "device"
// buffers are host memory here (fake_cudart.cpp), so each collective is the MPI collective of the same
// name on them, run when the stream gets to it (deferred_streams.h: inside the call, or under
// ZERO_EMULATED_STREAMS when a synchronisation needs it; the buffers are checked in the call). bf16 reductions add in fp32 and round once per combination (core/math/bf16.h), as NCCL's do; the
// order of combination is MPI's, not NCCL's ring, so multi-rank bf16 sums need not match a GPU's bits.
// A communicator is a sub-communicator of MPI_COMM_WORLD named by its unique id (the world rank that made it and
// that process's count of ids made), and every rank of the world initialises one at once: ncclCommInitRank is
// an MPI_Comm_split of the world by that name (pmtrain's one communicator over the world does so, and under
// hybrid sharding each rank's shard group's, then each rank's replicas'); it checks the size it gets.
#define OMPI_SKIP_MPICXX 1  // the C API only (the deprecated C++ bindings need their own library)
#include <mpi.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/math/bf16.h"
#include "tests/cuda/emulated/deferred_streams.h"

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, nranks = 0;
  // Set by ncclCommAbort: collectives still queued for the communicator do nothing (NCCL's abort drops them).
  std::shared_ptr<bool> aborted = std::make_shared<bool>(false);
};

namespace {

template <class Combine>
void bf16_combine(void* in, void* inout, int* len, Combine combine) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = zero::math::f32_to_bf16(combine(zero::math::bf16_to_f32(a[i]), zero::math::bf16_to_f32(b[i])));
}
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_combine(in, inout, len, [](float x, float y) { return x + y; });
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_combine(in, inout, len, [](float x, float y) { return x > y ? x : y; });
}
void bf16_min(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_combine(in, inout, len, [](float x, float y) { return x < y ? x : y; });
}

struct Mpi {
  MPI_Datatype type;
  MPI_Op op;
};
// The MPI type and op of an NCCL type and op; false for a combination this fake does not carry.
bool mpi_of(ncclDataType_t t, ncclRedOp_t op, Mpi& out) {
  static MPI_Op bf16_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  if (t == ncclBfloat16) {
    if (bf16_ops[0] == MPI_OP_NULL) {
      MPI_Op_create(bf16_sum, 1, &bf16_ops[0]);
      MPI_Op_create(bf16_max, 1, &bf16_ops[1]);
      MPI_Op_create(bf16_min, 1, &bf16_ops[2]);
    }
    out.type = MPI_UINT16_T;
    if (op == ncclSum) out.op = bf16_ops[0];
    else if (op == ncclMax) out.op = bf16_ops[1];
    else if (op == ncclMin) out.op = bf16_ops[2];
    else return false;
    return true;
  }
  switch (t) {
    case ncclFloat32: out.type = MPI_FLOAT; break;
    case ncclFloat64: out.type = MPI_DOUBLE; break;
    case ncclInt32: out.type = MPI_INT32_T; break;
    case ncclInt64: out.type = MPI_INT64_T; break;
    case ncclUint8: out.type = MPI_UINT8_T; break;
    default: return false;
  }
  if (op == ncclSum) out.op = MPI_SUM;
  else if (op == ncclMax) out.op = MPI_MAX;
  else if (op == ncclMin) out.op = MPI_MIN;
  else return false;
  return true;
}
size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclFloat64: case ncclInt64: case ncclUint64: return 8;
    case ncclFloat32: case ncclInt32: case ncclUint32: return 4;
    case ncclFloat16: case ncclBfloat16: return 2;
    default: return 1;
  }
}
ncclResult_t result(int mpi_rc) { return mpi_rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError; }

// Queues the collective `mpi_call` (returning an MPI code) on stream s for comm. Run inside the call (not
// deferring), its failure is the call's result; deferred, the call succeeds and a failure aborts when it runs,
// as an asynchronous NCCL error would surface later.
template <class MpiCall>
ncclResult_t on_stream(ncclComm_t comm, cudaStream_t s, MpiCall mpi_call) {
  if (!zero::fake_cuda::deferring()) return result(mpi_call());
  zero::fake_cuda::enqueue(s, [aborted = comm->aborted, mpi_call] {
    if (*aborted) return;
    if (const int code = mpi_call(); code != MPI_SUCCESS) {
      std::fprintf(stderr, "emulated NCCL: a queued collective failed in MPI (code %d)\n", code);
      std::abort();
    }
  });
  return ncclSuccess;
}

// NCCL's buffer rule: send and receive buffers are the same (the in-place form, `in_place`) or do not
// overlap; anything between is undefined there, and an error here. For reduce-scatter the in-place form is
// recv = send + rank * recvcount, for all-gather send = recv + rank * sendcount.
// NCCL reads and writes its buffers from kernels: they must be device memory (cudaMalloc'd: the fake runtime
// knows which), never pageable host memory, which a GPU's NCCL would fault on.
bool device_memory(const void* p, size_t bytes, const char* what) {
  if (bytes == 0) return true;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeDevice) return true;
  std::fprintf(stderr, "emulated NCCL: the %s buffer %p (%zu bytes) is not device memory; NCCL takes device buffers\n",
               what, p, bytes);
  return false;
}

bool buffers_ok(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes, bool in_place) {
  if (!device_memory(send, send_bytes, "send") || !device_memory(recv, recv_bytes, "receive")) return false;
  if (in_place || send_bytes == 0 || recv_bytes == 0) return true;
  const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  const bool apart = s + send_bytes <= r || r + recv_bytes <= s;
  if (!apart)
    std::fprintf(stderr, "emulated NCCL: send [%#zx, +%zu) and receive [%#zx, +%zu) overlap outside the in-place form\n",
                 size_t(s), send_bytes, size_t(r), recv_bytes);
  return apart;
}

}  // namespace

extern "C" {

// The id: a tag, then the maker's world rank and its count of ids made so far (two ints).
constexpr char kIdTag[] = "zero emulated nccl";
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static int made = 0;
  std::memset(id, 0, sizeof *id);
  std::strncpy(id->internal, kIdTag, sizeof id->internal - 1);
  int name[2] = {0, made++};
  MPI_Comm_rank(MPI_COMM_WORLD, &name[0]);
  std::memcpy(id->internal + sizeof kIdTag, name, sizeof name);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  // As NCCL does under NCCL_DEBUG (VERSION or more): its version on stdout, once a process, rank 0 only
  // (what broke `pmtrain bench --json` on the H200: tests/cuda/pmtrain_bench_cuda.sh checks it stays off stdout).
  static bool version_printed = false;
  const char* debug = std::getenv("NCCL_DEBUG");
  if (rank == 0 && !version_printed && debug != nullptr && *debug != '\0') {
    std::printf("NCCL version 2.28.9+cuda13.0 (emulated)\n");
    std::fflush(stdout);
    version_printed = true;
  }
  int name[2] = {0, 0};
  std::memcpy(name, id.internal + sizeof kIdTag, sizeof name);
  auto* c = new ncclComm;
  c->rank = rank, c->nranks = nranks;
  if (MPI_Comm_split(MPI_COMM_WORLD, name[0] * 4096 + name[1] % 4096, rank, &c->mpi) != MPI_SUCCESS) {
    delete c;
    return ncclSystemError;
  }
  int size = 0;
  MPI_Comm_size(c->mpi, &size);
  if (size != nranks) {
    std::fprintf(stderr, "emulated NCCL: a communicator of %d ranks, but %d ranks of the world initialised it at once "
                         "(every rank of the world must initialise a communicator together)\n", nranks, size);
    MPI_Comm_free(&c->mpi);
    delete c;
    return ncclInvalidUsage;
  }
  *comm = c;
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!*comm->aborted) zero::fake_cuda::drain_all();  // NCCL's destroy completes what was queued
  MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  *comm->aborted = true;
  return ncclCommDestroy(comm);
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* async) {
  *async = ncclSuccess;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) {
  return r == ncclSuccess ? "no error (emulated NCCL)" : "error (emulated NCCL over MPI)";
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  Mpi m;
  if (!mpi_of(t, op, m)) return ncclInvalidArgument;
  const size_t bytes = count * type_bytes(t);
  if (!buffers_ok(send, bytes, recv, bytes, send == recv)) return ncclInvalidArgument;
  return on_stream(comm, stream, [=] {
    return MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, int(count), m.type, m.op, comm->mpi);
  });
}
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  Mpi m;
  if (!mpi_of(t, op, m)) return ncclInvalidArgument;
  // NCCL's in-place form (recv is this rank's slice of send) is not MPI's (which writes the slice at the
  // buffer's start): reduce into scratch, then copy.
  const size_t bytes = recvcount * type_bytes(t);
  if (!buffers_ok(send, bytes * size_t(comm->nranks), recv, bytes,
                  static_cast<const char*>(send) + size_t(comm->rank) * bytes == recv))
    return ncclInvalidArgument;
  return on_stream(comm, stream, [=] {
    std::vector<char> scratch(bytes);
    const int rc = MPI_Reduce_scatter_block(send, scratch.data(), int(recvcount), m.type, m.op, comm->mpi);
    if (bytes) std::memcpy(recv, scratch.data(), bytes);
    return rc;
  });
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = sendcount * type_bytes(t);
  const bool in_place = static_cast<const char*>(recv) + comm->rank * bytes == send;
  if (!buffers_ok(send, bytes, recv, bytes * size_t(comm->nranks), in_place)) return ncclInvalidArgument;
  return on_stream(comm, stream, [=] {
    return MPI_Allgather(in_place ? MPI_IN_PLACE : send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE,
                         comm->mpi);
  });
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * type_bytes(t);
  if (!device_memory(recv, bytes, "receive")) return ncclInvalidArgument;
  if (comm->rank == root && !buffers_ok(send, bytes, recv, bytes, send == recv)) return ncclInvalidArgument;
  return on_stream(comm, stream, [=] {
    if (comm->rank == root && send != recv) std::memmove(recv, send, bytes);
    return MPI_Bcast(recv, int(bytes), MPI_BYTE, root, comm->mpi);
  });
}

}  // extern "C"
