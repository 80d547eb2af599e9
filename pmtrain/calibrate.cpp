#include "pmtrain/calibrate.h"

#include <unistd.h>

#include <Eigen/Dense>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/check.h"
#include "optim/adamw.h"

namespace zero::pmtrain {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs f until `budget` seconds have passed (at least twice); returns seconds per call of the best half.
template <class F>
double time_per_call(F&& f, double budget) {
  f();  // warm up (page faults, Eigen's packing buffers)
  double best = 1e30;
  const auto start = std::chrono::steady_clock::now();
  int n = 0;
  while (n < 2 || seconds_since(start) < budget) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
    ++n;
  }
  return best;
}

constexpr Link kLinks[] = {
    {"pcie4", "PCIe 4.0 x16, ~25 GB/s sustained of 32 GB/s", 25e9},
    {"nvlink-h100", "NVLink 4 of an H100 SXM node, ~370 GB/s ring bus bandwidth of 450 GB/s", 370e9},
    {"ib100", "InfiniBand 100 Gb/s, ~11 GB/s", 11e9},
    {"ib200", "InfiniBand 200 Gb/s, ~22 GB/s", 22e9},
    {"ib400", "InfiniBand 400 Gb/s, ~45 GB/s", 45e9},
};
}  // namespace

nlohmann::json ComputeProfile::to_json() const {
  nlohmann::json j = {{"source", source},         {"assumed", assumed},   {"device", device},
                      {"gemm_flops", gemm_flops}, {"elementwise_bytes", elementwise_bytes},
                      {"adamw_elements", adamw_elements},
                      {"threads", threads},       {"cores", cores},       {"process_baseline_bytes", process_baseline_bytes}};
  nlohmann::json c = nlohmann::json::object();
  for (const auto& [w, r] : collectives)
    c[std::to_string(w)] = {{"all_reduce", r.all_reduce}, {"reduce_scatter", r.reduce_scatter}, {"all_gather", r.all_gather}};
  j["collective_elements_per_s"] = c;
  return j;
}

ComputeProfile assumed_profile(bool gpu) {
  ComputeProfile p;
  if (gpu) {
    p.source = "assumed: H100 SXM, 60% of 989 TFLOP/s dense bf16, 70% of 3.35 TB/s";
    p.device = "gpu";
    p.gemm_flops = 0.6 * 989e12;
    p.elementwise_bytes = 0.7 * 3.35e12;
  } else {
    p.source = "assumed: one CPU core at 30 GFLOP/s fp32 GEMM, 8 GB/s element-wise";
    p.gemm_flops = 30e9;
    p.elementwise_bytes = 8e9;
    p.cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  }
  return p;
}

ComputeProfile load_profile(const std::string& path) {
  std::ifstream in(path);
  ZERO_REQUIRE(in.good(), ConfigError, "--profile {}: cannot read the file (write one with `pmtrain calibrate --out {}`)",
               path, path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("--profile {}: not JSON: {}", path, e.what()));
  }
  ComputeProfile p;
  auto num = [&](const char* key, double& out, bool required) {
    if (!j.contains(key)) {
      ZERO_REQUIRE(!required, ConfigError, "--profile {}: no '{}' (write one with `pmtrain calibrate`)", path, key);
      return;
    }
    ZERO_REQUIRE(j[key].is_number() && j[key].get<double>() >= 0, ConfigError,
                 "--profile {}: '{}' must be a number >= 0", path, key);
    out = j[key].get<double>();
  };
  num("gemm_flops", p.gemm_flops, true);
  num("elementwise_bytes", p.elementwise_bytes, true);
  ZERO_REQUIRE(p.gemm_flops > 0 && p.elementwise_bytes > 0, ConfigError,
               "--profile {}: gemm_flops and elementwise_bytes must be > 0", path);
  num("process_baseline_bytes", p.process_baseline_bytes, false);
  num("adamw_elements", p.adamw_elements, false);
  double threads = 1, cores = 1;
  num("threads", threads, false);
  num("cores", cores, false);
  p.threads = std::max(1, int(threads));
  p.cores = std::max(1, int(cores));
  if (j.contains("collective_elements_per_s")) {
    const nlohmann::json& c = j["collective_elements_per_s"];
    ZERO_REQUIRE(c.is_object(), ConfigError, "--profile {}: 'collective_elements_per_s' must map world sizes to rates",
                 path);
    for (const auto& [w, rates] : c.items()) {
      int world = 0;
      const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), world);
      auto rate = [&](const char* kind) {
        const bool ok = ec == std::errc() && end == w.data() + w.size() && world >= 1 && rates.is_object() &&
                        rates.contains(kind) && rates[kind].is_number() && rates[kind].get<double>() > 0;
        ZERO_REQUIRE(ok, ConfigError,
                     "--profile {}: collective_elements_per_s['{}'] must give {} a rate > 0 (world sizes >= 1)", path, w,
                     kind);
        return rates[kind].get<double>();
      };
      p.collectives[world] = {rate("all_reduce"), rate("reduce_scatter"), rate("all_gather")};
    }
  }
  p.device = j.value("device", std::string("cpu"));
  ZERO_REQUIRE(p.device == "cpu" || p.device == "gpu", ConfigError, "--profile {}: 'device' is cpu or gpu, not '{}'",
               path, p.device);
  p.assumed = j.value("assumed", false);
  p.source = j.value("source", std::string("profile")) + " (" + path + ")";
  return p;
}

ComputeProfile measure_cpu_profile(int threads) {
  Eigen::setNbThreads(threads);
  ComputeProfile p;
  p.assumed = false;
  p.threads = threads;
  p.cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  p.source = fmt::format("measured on {} ({} thread{})", host, threads, threads == 1 ? "" : "s");
  // GEMM: the shapes of a projection (tokens x hidden x out), fp32 as the CPU backend computes.
  const int n = 1024;
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  const double t_gemm = time_per_call([&] { c.noalias() = a * b; }, 2.0);
  p.gemm_flops = 2.0 * n * double(n) * n / t_gemm;
  // Element-wise: z = x + y over 64 MiB arrays (two reads, one write), larger than any cache.
  const size_t m = size_t(16) << 20;
  std::vector<float> x(m, 1.0f), y(m, 2.0f), z(m);
  const double t_add = time_per_call(
      [&] {
        for (size_t i = 0; i < m; ++i) z[i] = x[i] + y[i];
      },
      1.0);
  p.elementwise_bytes = 3.0 * 4.0 * double(m) / t_add;
  // AdamW over 16M elements (param, grad, m, v: 256 MiB), as the engine runs it on a shard.
  std::vector<float> m1(m, 0.0f), v1(m, 0.0f);
  const optim::AdamWConfig cfg;
  int64_t t = 0;
  const double t_adamw =
      time_per_call([&] { optim::adamw_step(z.data(), x.data(), m1.data(), v1.data(), m, cfg, 1e-5f, ++t, true, 1.0f); }, 1.0);
  p.adamw_elements = double(m) / t_adamw;
  return p;
}

// The engine's collectives as it runs them on the CPU backend (MpiCommunicator, started and waited one at a
// time) over messages of 4M fp32 elements (the size accuracy runs use for a bucket): an all-reduce, a
// reduce-scatter and an all-gather each, best of a few rounds; elements a second in comm_report()'s counting.
// Collective: every rank of `comm` calls it.
ComputeProfile::CollectiveRates measure_collectives(Communicator& comm) {
  const size_t n = size_t(4) << 20, W = size_t(comm.world());
  const size_t shard = n / W;
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  auto timed = [&](auto&& f) {  // the slowest rank's time, best of 3 after a warm-up round
    double best = 1e30;
    for (int round = 0; round < 4; ++round) {
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      f();
      double secs = seconds_since(t0);
      comm.all_reduce_scalars(&secs, 1, ReduceOp::Max);
      if (round > 0) best = std::min(best, secs);
    }
    return std::max(best, 1e-9);  // an in-place all-reduce at one rank does nothing
  };
  ComputeProfile::CollectiveRates r;
  r.all_reduce = double(2 * n) / timed([&] { comm.all_reduce(a.data(), n, DType::F32, ReduceOp::Sum); });
  std::fill(a.begin(), a.end(), 1.0f);
  r.reduce_scatter = double(shard * W) / timed([&] { comm.reduce_scatter(a.data(), b.data(), shard, DType::F32, ReduceOp::Sum); });
  r.all_gather = double(shard * W) / timed([&] { comm.all_gather(b.data(), a.data(), shard, DType::F32); });
  return r;
}

const Link& find_link(const std::string& name) {
  for (const Link& l : kLinks)
    if (name == l.name) return l;
  throw ConfigError(fmt::format("unknown link '{}' (known: {})", name, link_names()));
}

std::string link_names() {
  std::string s;
  for (const Link& l : kLinks) s += (s.empty() ? "" : ", ") + std::string(l.name);
  return s;
}

int run_calibrate(const CalibrateArgs& a, MpiRuntime& mpi) {
  const std::unique_ptr<MpiCommunicator> comm = mpi.world_communicator();
  const int W = comm->world();
  const ComputeProfile::CollectiveRates coll = measure_collectives(*comm);
  if (comm->rank() != 0) return 0;
  ComputeProfile p = measure_cpu_profile(a.threads);
  if (!a.out.empty() && std::filesystem::exists(a.out)) {  // keep the other world sizes' rates
    try {
      p.collectives = load_profile(a.out).collectives;
    } catch (const ConfigError&) {
      // not a profile (or an older one): written anew
    }
  }
  p.collectives[W] = coll;
  printf("calibrate: %s\n  GEMM fp32 (Eigen, 1024^3): %.1f GFLOP/s\n  element-wise (z = x + y, 64 MiB): %.1f GB/s\n"
         "  AdamW step: %.0f M elements/s\n  collectives at %d rank%s (MPI, 4M-element messages, M elements/s as "
         "counted): all-reduce %.0f, reduce-scatter %.0f, all-gather %.0f\n",
         p.source.c_str(), p.gemm_flops / 1e9, p.elementwise_bytes / 1e9, p.adamw_elements / 1e6, W, W == 1 ? "" : "s",
         coll.all_reduce / 1e6, coll.reduce_scatter / 1e6, coll.all_gather / 1e6);
  // The GPU side (cuBLASLt bf16 GEMM, device bandwidth) needs the CUDA model ops; until then a GPU plan uses
  // the assumed H100 profile, marked as such.
  printf("  GPU: not measured by this build (plans for GPUs use the assumed H100 profile)\n");
  if (!a.out.empty()) {
    std::ofstream out(a.out);
    ZERO_REQUIRE(out.good(), ConfigError, "--out {}: cannot write", a.out);
    out << p.to_json().dump(2) << "\n";
    ZERO_REQUIRE(out.good(), ConfigError, "--out {}: write failed", a.out);
    printf("wrote %s (use it with `pmtrain plan CONFIG --profile %s`)\n", a.out.c_str(), a.out.c_str());
  }
  return 0;
}

}  // namespace zero::pmtrain
