// Collective bandwidth of our Communicator against raw MPI calls of the same size, in the same run,
// interleaved (ours, raw, ours, raw, ...) so machine noise hits both alike. nccl-tests conventions:
// size in bytes of the full buffer, algbw = size / time, busbw = algbw x 2(n-1)/n for all-reduce and
// x (n-1)/n for reduce-scatter and all-gather, GB = 1e9. A correctness check runs at every size.
//   mpirun -np 4 collectives_bench [--max-mib 256] [--json out.json]
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/collective_bench.h"
#include "comm/bootstrap.h"

using namespace zero;
using namespace zero::bench;

namespace {
struct Buffers {
  std::vector<float> send, recv;
};

// count = elements of the full (unsharded) buffer, divisible by world.
void run_ours(Communicator& c, Op op, Buffers& b, size_t count) {
  const size_t W = c.world(), shard = count / W;
  switch (op) {
    case Op::AllReduce: c.all_reduce(b.send.data(), count, DType::F32, ReduceOp::Sum); break;
    case Op::ReduceScatter: c.reduce_scatter(b.send.data(), b.recv.data(), shard, DType::F32, ReduceOp::Sum); break;
    case Op::AllGather: c.all_gather(b.send.data(), b.recv.data(), shard, DType::F32); break;
  }
}
void run_raw(MPI_Comm comm, int W, Op op, Buffers& b, size_t count) {
  const int shard = int(count / W);
  MPI_Request r;
  switch (op) {  // the same non-blocking calls our layer makes, waited at once
    case Op::AllReduce: MPI_Iallreduce(MPI_IN_PLACE, b.send.data(), int(count), MPI_FLOAT, MPI_SUM, comm, &r); break;
    case Op::ReduceScatter: MPI_Ireduce_scatter_block(b.send.data(), b.recv.data(), shard, MPI_FLOAT, MPI_SUM, comm, &r); break;
    case Op::AllGather: MPI_Iallgather(b.send.data(), shard, MPI_FLOAT, b.recv.data(), shard, MPI_FLOAT, comm, &r); break;
  }
  MPI_Wait(&r, MPI_STATUS_IGNORE);
}

bool check(Communicator& c, Op op, Buffers& b, size_t count) {
  const int W = c.world(), R = c.rank();
  const size_t shard = count / W;
  for (size_t i = 0; i < count; ++i) b.send[i] = float((i % 7) + R);
  run_ours(c, op, b, count);
  const float sum_r = float(W * (W - 1) / 2);
  for (size_t i = 0; i < std::min<size_t>(count, 4096); ++i) {
    float expect, got;
    if (op == Op::AllReduce) { expect = float(W * (i % 7)) + sum_r; got = b.send[i]; }
    else if (op == Op::ReduceScatter) { if (i >= shard) break; expect = float(W * ((R * shard + i) % 7)) + sum_r; got = b.recv[i]; }
    else { expect = float((i % shard) % 7 + i / shard); got = b.recv[i]; }
    if (got != expect) return false;
  }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  size_t max_mib = 256;
  std::string json_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!strcmp(argv[i], "--max-mib")) max_mib = std::stoul(argv[++i]);
    else if (!strcmp(argv[i], "--json")) json_path = argv[++i];
  }
  auto comm = mpi.world_communicator();
  const int W = comm->world(), R = comm->rank();
  const MPI_Comm raw = comm->mpi_comm();
  FILE* json = (R == 0 && !json_path.empty()) ? fopen(json_path.c_str(), "w") : nullptr;
  if (json) fprintf(json, "[\n");
  if (R == 0) {
    printf("# collectives_bench: world %d, fp32, ours = zero::MpiCommunicator, raw = the same MPI_I* call + MPI_Wait\n", W);
    print_table_header();
  }
  double worst = 0, sum_ratio = 0;
  int rows = 0;
  bool first = true;
  for (Op op : {Op::AllReduce, Op::ReduceScatter, Op::AllGather}) {
    for (size_t bytes = 1024; bytes <= max_mib * 1024 * 1024; bytes *= 4) {
      const size_t count = std::max<size_t>(bytes / 4 / W * W, W);
      Buffers b{std::vector<float>(count), std::vector<float>(count)};
      const bool ok = check(*comm, op, b, count);
      // Iterations: about 0.2 s of work per side, at least 5, after 2 warm-ups.
      const auto [to, tr] = time_interleaved(raw, [&] { run_ours(*comm, op, b, count); }, [&] { run_raw(raw, W, op, b, count); }, 2, 2000);
      const double full_bytes = double(count) * 4;
      const double ratio = to / tr;
      if (R == 0) {
        print_table_row(op, full_bytes, count, to, tr, W, ok);
        if (json)
          fprintf(json, "%s  {\"op\": \"%s\", \"bytes\": %.0f, \"ours_s\": %.9f, \"raw_s\": %.9f, \"ratio\": %.4f, \"ok\": %s}",
                  first ? "" : ",\n", op_name(op), full_bytes, to, tr, ratio, ok ? "true" : "false");
        first = false;
      }
      worst = std::max(worst, ratio);
      sum_ratio += ratio;
      ++rows;
    }
  }
  if (R == 0) {
    printf("# summary: world %d, mean time ratio ours/raw %.4f, worst %.4f (target: overhead <= 5%%, ratio <= 1.05)\n",
           W, sum_ratio / rows, worst);
    if (json) { fprintf(json, "\n]\n"); fclose(json); }
  }
  return 0;
}
