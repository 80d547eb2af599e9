// Collective bandwidth of NcclCommunicator against raw NCCL calls of the same size, in the same run,
// interleaved (ours, raw, ours, raw, ...). nccl-tests conventions: size in bytes of the full buffer,
// algbw = size / time, busbw = algbw x 2(n-1)/n for all-reduce and x (n-1)/n for reduce-scatter and
// all-gather, GB = 1e9. Each timing is one call waited on the host (ours: handle wait; raw: stream
// synchronize), median over iterations. A correctness check runs at every size. Without a GPU on
// every rank it prints a skip line and exits 0.
//   mpirun -np 2 nccl_collectives_bench [--max-mib 1024] [--dtype fp32|bf16] [--json out.json]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/collective_bench.h"
#include "comm/bootstrap.h"
#include "cuda/check.h"
#include "cuda/device_select.h"
#include "cuda/nccl_communicator.h"

using namespace zero;
using namespace zero::bench;

namespace {
struct Setup {
  NcclCommunicator* comm;
  cudaStream_t raw_stream;
  DType t;
  void* send;  // count elements
  void* recv;  // count elements
};

// count = elements of the full (unsharded) buffer, divisible by world.
void run_ours(Setup& s, Op op, size_t count) {
  const size_t shard = count / s.comm->world();
  switch (op) {
    case Op::AllReduce: s.comm->all_reduce(s.send, count, s.t, ReduceOp::Sum); break;
    case Op::ReduceScatter: s.comm->reduce_scatter(s.send, s.recv, shard, s.t, ReduceOp::Sum); break;
    case Op::AllGather: s.comm->all_gather(s.send, s.recv, shard, s.t); break;
  }
}
void run_raw(Setup& s, Op op, size_t count) {
  const size_t shard = count / s.comm->world();
  const ncclDataType_t nt = s.t == DType::BF16 ? ncclBfloat16 : ncclFloat32;
  switch (op) {
    case Op::AllReduce: NCCL_CHECK(ncclAllReduce(s.send, s.send, count, nt, ncclSum, s.comm->nccl_comm(), s.raw_stream)); break;
    case Op::ReduceScatter: NCCL_CHECK(ncclReduceScatter(s.send, s.recv, shard, nt, ncclSum, s.comm->nccl_comm(), s.raw_stream)); break;
    case Op::AllGather: NCCL_CHECK(ncclAllGather(s.send, s.recv, shard, nt, s.comm->nccl_comm(), s.raw_stream)); break;
  }
  CUDA_CHECK(cudaStreamSynchronize(s.raw_stream));
}

// Small integers: exact in fp32 and bf16 sums at the world sizes we run.
float value(size_t i, int r) { return float(int((i % 7) + size_t(r))); }

std::vector<uint8_t> host_values(size_t count, int r, DType t) {
  std::vector<uint8_t> h(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) {
    const float x = value(i, r);
    if (t == DType::F32) {
      std::memcpy(h.data() + 4 * i, &x, 4);
    } else {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      const uint16_t b = uint16_t(u >> 16);  // small integers: exact, no rounding needed
      std::memcpy(h.data() + 2 * i, &b, 2);
    }
  }
  return h;
}
float read(const std::vector<uint8_t>& h, size_t i, DType t) {
  if (t == DType::F32) {
    float x;
    std::memcpy(&x, h.data() + 4 * i, 4);
    return x;
  }
  uint16_t b;
  std::memcpy(&b, h.data() + 2 * i, 2);
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

bool check(Setup& s, Op op, size_t count) {
  const int W = s.comm->world(), R = s.comm->rank();
  const size_t shard = count / W, esz = dtype_size(s.t);
  const auto h = host_values(count, R, s.t);
  CUDA_CHECK(cudaMemcpy(s.send, h.data(), h.size(), cudaMemcpyHostToDevice));
  run_ours(s, op, count);
  const size_t n_out = op == Op::ReduceScatter ? shard : count;
  const size_t n_check = std::min<size_t>(n_out, 4096);
  std::vector<uint8_t> got(n_check * esz);
  CUDA_CHECK(cudaMemcpy(got.data(), op == Op::AllReduce ? s.send : s.recv, got.size(), cudaMemcpyDeviceToHost));
  const float sum_r = float(W * (W - 1) / 2);
  for (size_t i = 0; i < n_check; ++i) {
    float expect;
    if (op == Op::AllReduce) expect = float(W * (i % 7)) + sum_r;
    else if (op == Op::ReduceScatter) expect = float(W * ((R * shard + i) % 7)) + sum_r;
    else expect = value(i % shard, int(i / shard));
    if (read(got, i, s.t) != expect) return false;
  }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  size_t max_mib = 256;
  std::string json_path, dtype = "fp32";
  for (int i = 1; i + 1 < argc; ++i) {
    if (!strcmp(argv[i], "--max-mib")) max_mib = std::stoul(argv[++i]);
    else if (!strcmp(argv[i], "--json")) json_path = argv[++i];
    else if (!strcmp(argv[i], "--dtype")) dtype = argv[++i];
  }
  const LaunchInfo& info = mpi.info();
  int have = cuda_device_count() > 0, all = 0;
  MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (info.rank == 0) printf("# nccl_collectives_bench: skipped (no CUDA device on some rank)\n");
    return 0;
  }
  const DeviceChoice dev = select_device(MPI_COMM_WORLD);
  if (dev.shared) isolate_ranks_for_shared_gpu(dev, info.rank);
  const DType t = parse_dtype(dtype, "--dtype");
  NcclCommunicator comm(MPI_COMM_WORLD);
  const int W = comm.world(), R = comm.rank();
  const size_t max_bytes = max_mib * 1024 * 1024;
  Setup s{&comm, nullptr, t, nullptr, nullptr};
  CUDA_CHECK(cudaStreamCreate(&s.raw_stream));
  CUDA_CHECK(cudaMalloc(&s.send, max_bytes + 64 * W));
  CUDA_CHECK(cudaMalloc(&s.recv, max_bytes + 64 * W));

  FILE* json = (R == 0 && !json_path.empty()) ? fopen(json_path.c_str(), "w") : nullptr;
  if (json) fprintf(json, "[\n");
  if (R == 0) {
    printf("# nccl_collectives_bench: world %d, %s, device %d of %d%s, ours = zero::NcclCommunicator + handle wait, raw = "
           "the same nccl call + stream sync\n", W, dtype_name(t), dev.device, dev.device_count,
           dev.shared ? " (ranks share GPUs: NCCL_HOSTID per rank, network transport)" : "");
    print_table_header();
  }
  double worst = 0, sum_ratio = 0;
  int rows = 0;
  bool first = true, all_ok = true;
  for (Op op : {Op::AllReduce, Op::ReduceScatter, Op::AllGather}) {
    for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
      const size_t count = std::max<size_t>(bytes / dtype_size(t) / W * W, W);
      const bool ok = check(s, op, count);
      all_ok &= ok;
      const auto [to, tr] = time_interleaved(MPI_COMM_WORLD, [&] { run_ours(s, op, count); }, [&] { run_raw(s, op, count); }, 3, 1000);
      const double full_bytes = double(count) * dtype_size(t);
      const double factor = bus_factor(op, W);
      const double ratio = to / tr;
      if (R == 0) {
        print_table_row(op, full_bytes, count, to, tr, W, ok);
        if (json)
          fprintf(json, "%s  {\"op\": \"%s\", \"dtype\": \"%s\", \"world\": %d, \"bytes\": %.0f, \"ours_s\": %.9f, "
                  "\"raw_s\": %.9f, \"busbw_GBps\": %.3f, \"ratio\": %.4f, \"ok\": %s}",
                  first ? "" : ",\n", op_name(op), dtype_name(t), W, full_bytes, to, tr, full_bytes / to / 1e9 * factor,
                  ratio, ok ? "true" : "false");
        first = false;
      }
      worst = std::max(worst, ratio);
      sum_ratio += ratio;
      ++rows;
    }
  }
  if (R == 0) {
    printf("# summary: world %d, %s, mean time ratio ours/raw %.4f, worst %.4f, correctness %s\n", W, dtype_name(t),
           sum_ratio / rows, worst, all_ok ? "ok" : "FAILED");
    if (json) { fprintf(json, "\n]\n"); fclose(json); }
  }
  CUDA_CHECK(cudaFree(s.send));
  CUDA_CHECK(cudaFree(s.recv));
  CUDA_CHECK(cudaStreamDestroy(s.raw_stream));
  return all_ok ? 0 : 1;
}
