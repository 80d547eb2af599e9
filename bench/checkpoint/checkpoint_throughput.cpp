// Sharded checkpoint throughput: save (sync and async) and load (same layout, and resharded) of an
// engine's fp32 master/m/v, against a plain sequential write (+fsync) and read of the same number of
// bytes per rank measured in the same run. Each rank writes its own file; GB/s = total bytes over all
// ranks / wall time (barrier to barrier), GB = 1e9. Before every read the page cache of the files is
// dropped (posix_fadvise DONTNEED after fsync) for both the checkpoint and the baseline. Saves include
// the manifest, renames and `latest`; deleting old checkpoints (retention) is kept out of the timing.
// Usage: mpirun -np N bench_checkpoint_throughput [--mb TOTAL_STATE_MB] [--dir /tmp] [--reps 3]
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/shard_layout.h"
#include "comm/mpi_communicator.h"
#include "core/check.h"

using namespace zero;
namespace fs = std::filesystem;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Wall time of f on the slowest rank, barrier to barrier.
double timed(Communicator& comm, const std::function<void()>& f) {
  comm.barrier();
  const double t0 = now();
  f();
  comm.barrier();
  double dt = now() - t0;
  comm.all_reduce_scalars(&dt, 1, ReduceOp::Max);
  return dt;
}

void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}
void drop_dir_cache(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) drop_cache(e.path().string());
}

void plain_write(const std::string& path, const HostVector<char>& buf) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ZERO_CHECK(fd >= 0, "open {}", path);
  for (size_t off = 0; off < buf.size();) {
    const ssize_t w = ::write(fd, buf.data() + off, std::min<size_t>(buf.size() - off, size_t(64) << 20));
    ZERO_CHECK(w > 0, "write {}", path);
    off += size_t(w);
  }
  ::fsync(fd);
  ::close(fd);
}
void plain_read(const std::string& path, HostVector<char>& buf) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ZERO_CHECK(fd >= 0, "open {}", path);
  for (size_t off = 0; off < buf.size();) {
    const ssize_t r = ::read(fd, buf.data() + off, std::min<size_t>(buf.size() - off, size_t(64) << 20));
    ZERO_CHECK(r > 0, "read {}", path);
    off += size_t(r);
  }
  ::close(fd);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  double total_mb = 300;
  std::string base = "/tmp";
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mb") total_mb = std::stod(argv[i + 1]);
    else if (a == "--dir") base = argv[i + 1];
    else if (a == "--reps") reps = std::stoi(argv[i + 1]);
  }
  int rc = 0;
  try {
    MpiCommunicator comm(MPI_COMM_WORLD);
    const int W = comm.world(), r = comm.rank();
    // Model: 8 groups of equal size (an odd count so the last rank holds padding), 12 bytes per element.
    const size_t groups_n = 8;
    const size_t per_group = size_t(total_mb * 1e6 / 12.0 / groups_n) | 1;
    std::vector<GroupInfo> groups;
    for (size_t g = 0; g < groups_n; ++g)
      groups.push_back({fmt::format("layer{}", g), {{fmt::format("layer{}.weight", g), per_group, true}}});
    EngineConfig cfg;
    cfg.stage = 3;
    cfg.bucket_elements = per_group;
    auto ops = make_cpu_ops();
    TrackingAllocator alloc(make_host_allocator());
    Engine engine(cfg, groups, comm, *ops, alloc);
    engine.init_params([&](int g, int, float* dst) {
      for (size_t i = 0; i < per_group; ++i) dst[i] = std::sin(float(i % 100003) * 0.001f + float(g));
    });
    {  // non-trivial m and v, written through the engine like a checkpoint load
      HostVector<char> file = checkpoint::read_rank_file(engine);
      for (size_t off = 0, g = 0; g < groups_n; ++g) {
        const size_t shard = engine.partition().groups[g].shard;
        float* a = reinterpret_cast<float*>(file.data() + off);
        for (size_t i = 0; i < shard; ++i) a[shard + i] = a[i] * 0.1f, a[2 * shard + i] = a[i] * a[i];
        off += 3 * shard * sizeof(float);
      }
      size_t at = 0;
      checkpoint::load_rank_file(engine, [&](void* dst, size_t n) { std::memcpy(dst, file.data() + at, n), at += n; });
    }

    const std::string run = fmt::format("{}/zero_ckpt_bench_{}", base, W);
    if (r == 0) fs::remove_all(run), fs::create_directories(run);
    comm.barrier();
    const uint64_t my_bytes = checkpoint::rank_file_bytes(engine);
    double total_bytes = double(my_bytes);
    comm.all_reduce_scalars(&total_bytes, 1, ReduceOp::Sum);

    HostVector<char> plain = checkpoint::read_rank_file(engine);
    const std::string plain_path = fmt::format("{}/plain_rank_{}.bin", run, r);

    std::vector<double> t_plain_w, t_save, t_async_call, t_async_total, t_plain_r, t_load, t_load_rs;
    checkpoint::CheckpointOptions opts;
    opts.run_dir = run;
    opts.retention.keep_last = 1000;  // old checkpoints are removed outside the timed region
    checkpoint::Checkpointer sync_ck(engine, opts);
    opts.async = true;
    checkpoint::Checkpointer async_ck(engine, opts);
    checkpoint::TrainState st;
    for (int rep = 0; rep < reps + 1; ++rep) {  // rep 0 is warm-up
      const bool keep = rep > 0;
      auto rec = [&](std::vector<double>& v, double t) { if (keep) v.push_back(t); };
      rec(t_plain_w, timed(comm, [&] { plain_write(plain_path, plain); }));
      st.step = 2 * rep + 1;
      rec(t_save, timed(comm, [&] { sync_ck.save(st); }));
      st.step = 2 * rep + 2;
      double call = 0;
      const double total = timed(comm, [&] {
        const double t0 = now();
        async_ck.save(st);
        call = now() - t0;
        async_ck.wait();
      });
      comm.all_reduce_scalars(&call, 1, ReduceOp::Max);
      rec(t_async_call, call);
      rec(t_async_total, total);
      const std::string dir = async_ck.paths().step_dir(st.step);
      drop_cache(plain_path);
      if (r == 0) drop_dir_cache(dir);
      comm.barrier();
      rec(t_plain_r, timed(comm, [&] { plain_read(plain_path, plain); }));
      if (r == 0) drop_dir_cache(dir);
      comm.barrier();
      rec(t_load, timed(comm, [&] { checkpoint::load_checkpoint(engine, dir); }));
      if (r == 0)
        for (int64_t old : checkpoint::list_steps(sync_ck.paths())) fs::remove_all(sync_ck.paths().step_dir(old));
      comm.barrier();
    }
    auto gbs = [&](double t) { return total_bytes / t / 1e9; };
    if (r == 0) {
      printf("# checkpoint throughput: world %d, %zu groups x %zu elements, state %.1f MB (fp32 master+m+v), "
             "%d reps (median), dir %s\n", W, groups_n, per_group, total_bytes / 1e6, reps, run.c_str());
      printf("%-34s %12s %10s %10s\n", "operation", "bytes", "time(s)", "GB/s");
      auto row = [&](const char* name, double t) { printf("%-34s %12.0f %10.4f %10.3f\n", name, total_bytes, t, gbs(t)); };
      row("plain sequential write+fsync", median(t_plain_w));
      row("checkpoint save (sync)", median(t_save));
      row("checkpoint save (async, total)", median(t_async_total));
      printf("%-34s %12s %10.4f %10s\n", "checkpoint save (async, blocking)", "", median(t_async_call), "");
      row("plain sequential read (cold)", median(t_plain_r));
      row("checkpoint load (same layout)", median(t_load));
      printf("ratio save/plain write: %.3f   async blocking part / sync save: %.3f   load/plain read: %.3f\n",
             gbs(median(t_save)) / gbs(median(t_plain_w)), median(t_async_call) / median(t_save),
             gbs(median(t_load)) / gbs(median(t_plain_r)));
      printf("{\"world\": %d, \"bytes\": %.0f, \"plain_write_gbs\": %.4f, \"save_gbs\": %.4f, \"async_total_gbs\": %.4f, "
             "\"async_blocking_s\": %.5f, \"plain_read_gbs\": %.4f, \"load_gbs\": %.4f}\n", W, total_bytes,
             gbs(median(t_plain_w)), gbs(median(t_save)), gbs(median(t_async_total)), median(t_async_call),
             gbs(median(t_plain_r)), gbs(median(t_load)));
    }
    comm.barrier();
    if (r == 0) fs::remove_all(run);
  } catch (const std::exception& e) {
    fprintf(stderr, "bench_checkpoint_throughput: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
