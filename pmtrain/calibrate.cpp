#include "pmtrain/calibrate.h"

#include <unistd.h>

#include <Eigen/Dense>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <deque>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "comm/hybrid_groups.h"
#include "comm/mpi_communicator.h"
#include "core/check.h"
#include "core/host_name.h"
#include "core/memory.h"
#include "model/attention.h"
#include "model/cpu/cpu_model_ops.h"
#include "model/token_plan.h"
#include "optim/adamw.h"
#include "pmtrain/backend_setup.h"
#include "pmtrain/config.h"
#include "pmtrain/engine_assembly.h"
#include "pmtrain/model_setup.h"
#include "pmtrain/paths.h"
#include "zero/buffer_plan.h"
#include "zero/device_ops.h"
#include "zero/step_traffic.h"

namespace zero::pmtrain {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs f until `budget` seconds have passed (at least twice, after a warm-up call); returns its fastest call.
// `before` runs ahead of each call, untimed.
template <class F, class B = void (*)()>
double time_per_call(F&& f, double budget, B&& before = [] {}) {
  f();  // warm up (page faults, Eigen's packing buffers)
  double best = 1e30;
  const auto start = std::chrono::steady_clock::now();
  int n = 0;
  while (n < 2 || seconds_since(start) < budget) {
    before();
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
                      {"gemm_flops", gemm_flops}, {"attention_flops", attention_flops},
                      {"elementwise_bytes", elementwise_bytes},
                      {"adamw_elements", adamw_elements},
                      {"gradient_bytes", gradient_bytes},
                      {"swiglu_forward_elements", swiglu_forward_elements},
                      {"swiglu_backward_elements", swiglu_backward_elements},
                      {"threads", threads},       {"cores", cores},       {"process_baseline_bytes", process_baseline_bytes}};
  nlohmann::json c = nlohmann::json::object();
  for (const auto& [w, r] : collectives)
    c[std::to_string(w)] = {{"all_reduce", r.all_reduce}, {"reduce_scatter", r.reduce_scatter}, {"all_gather", r.all_gather}};
  j["collective_elements_per_s"] = c;
  nlohmann::json g = nlohmann::json::array();
  for (const GemmRate& r : gemm_rates)
    g.push_back({{"tokens", r.tokens}, {"in", r.in}, {"out", r.out}, {"flops", r.flops[0]}, {"input_grad_flops", r.flops[1]},
                 {"weight_grad_flops", r.flops[2]}});
  j["gemm_rates"] = g;
  return j;
}

std::vector<std::pair<int64_t, int64_t>> projection_shapes(const model::Qwen3Config& q) {
  const int64_t h = q.hidden_size;
  return {{h, q.q_dim() + 2 * q.kv_dim()}, {q.q_dim(), h}, {h, 2 * q.intermediate_size}, {q.intermediate_size, h}};
}

double ComputeProfile::gemm_rate(double tokens, int64_t in, int64_t out, GemmPass pass) const {
  const int k = int(pass);
  std::vector<const GemmRate*> shape;  // this shape's, by tokens
  for (const GemmRate& r : gemm_rates)
    if (r.in == in && r.out == out) shape.push_back(&r);
  if (shape.empty()) return gemm_flops;
  std::sort(shape.begin(), shape.end(), [](const GemmRate* a, const GemmRate* b) { return a->tokens < b->tokens; });
  if (tokens <= double(shape.front()->tokens)) return shape.front()->flops[k];
  if (tokens >= double(shape.back()->tokens)) return shape.back()->flops[k];
  size_t i = 1;
  while (double(shape[i]->tokens) < tokens) ++i;
  const GemmRate &a = *shape[i - 1], &b = *shape[i];
  const double f = std::log(tokens / double(a.tokens)) / std::log(double(b.tokens) / double(a.tokens));
  return a.flops[k] + f * (b.flops[k] - a.flops[k]);
}

ComputeProfile assumed_profile(bool gpu) {
  ComputeProfile p;
  if (gpu) {
    p.source = "assumed: H100 SXM, 60% of 989 TFLOP/s dense bf16, 70% of 3.35 TB/s; attention and SwiGLU at our "
               "kernels' speed measured on an H200";
    p.device = "gpu";
    p.gemm_flops = 0.6 * 989e12;
    p.elementwise_bytes = 0.7 * 3.35e12;
    // Our kernels as `pmtrain calibrate` measured them on an H200 (bench/results/gpu_20261128_h200, speed.tar.gz's
    // calibrate.txt): attention forward + backward at Qwen3-4B head shapes over 2 x 2048 tokens 80.1 TFLOP/s, SwiGLU
    // 228 / 151 G elements/s forward / backward. Neither is bound by the memory (SwiGLU moved 1.4 TB/s of the
    // H200's 4.8), so an H100 runs them as fast. Priced at the GEMMs' rate, attention cost a seventh of its time
    // (issue 11 makes the kernels faster: these numbers follow a new measurement).
    p.attention_flops = 80e12;
    p.swiglu_forward_elements = 228e9;
    p.swiglu_backward_elements = 151e9;
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
  num("gradient_bytes", p.gradient_bytes, false);
  num("attention_flops", p.attention_flops, false);
  num("swiglu_forward_elements", p.swiglu_forward_elements, false);
  num("swiglu_backward_elements", p.swiglu_backward_elements, false);
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
  if (j.contains("gemm_rates")) {
    const nlohmann::json& g = j["gemm_rates"];
    ZERO_REQUIRE(g.is_array(), ConfigError,
                 "--profile {}: 'gemm_rates' must be a list of {{tokens, in, out, flops, input_grad_flops, "
                 "weight_grad_flops}}",
                 path);
    for (const nlohmann::json& r : g) {
      auto pos = [&](const char* key) {
        ZERO_REQUIRE(r.is_object() && r.contains(key) && r[key].is_number() && r[key].get<double>() > 0, ConfigError,
                     "--profile {}: each gemm_rates entry needs '{}' > 0 (got {})", path, key, r.dump());
        return r[key].get<double>();
      };
      p.gemm_rates.push_back({int64_t(pos("tokens")), int64_t(pos("in")), int64_t(pos("out")),
                              {pos("flops"), pos("input_grad_flops"), pos("weight_grad_flops")}});
    }
  }
  p.device = j.value("device", std::string("cpu"));
  ZERO_REQUIRE(p.device == "cpu" || p.device == "gpu", ConfigError, "--profile {}: 'device' is cpu or gpu, not '{}'",
               path, p.device);
  p.assumed = j.value("assumed", false);
  p.source = j.value("source", std::string("profile")) + " (" + path + ")";
  return p;
}

namespace {
// n elements of backend memory holding values in [-1, 1) (not zeros: a GPU multiplies zeros faster).
Buffer filled_buffer(TrackingAllocator& alloc, DeviceOps& ops, size_t n, DType t) {
  Buffer b(alloc, n, t, MemCategory::Other);
  std::vector<float> host(std::min(n, size_t(1) << 20));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : host) x = u(rng);
  for (size_t a = 0; a < n; a += host.size())
    ops.copy_from_host(static_cast<char*>(b.data()) + a * dtype_size(t), t, host.data(), std::min(host.size(), n - a));
  return b;
}

// The sizes measured, by where the backend computes: a projection of a CPU run's size (1024 tokens x 1024
// -> 1024) and arrays past the last-level cache (16M elements); on a GPU a Qwen3-4B step's (8192 tokens x
// 4096 -> 4096, bf16 in the production mode) and arrays of 256M elements (1 GiB in fp32).
struct Sizes {
  int64_t tokens, features;
  size_t elements;      // element-wise and AdamW arrays
  size_t message;       // collectives: elements of one message (CPU: the accuracy runs' bucket)
  int reps;             // calls per timed call (a GPU call is shorter than the launch and sync around it)
};
Sizes sizes_for(const DeviceOps& ops) {
  if (ops.host_addressable()) return {1024, 1024, size_t(16) << 20, size_t(4) << 20, 1};
  return {8192, 4096, size_t(256) << 20, size_t(16) << 20, 10};
}

// `count` sequences of T tokens each: what the model ops check their token rows against.
model::TokenPlan sequences(int64_t count, int64_t T) {
  model::TokenPlan plan;
  plan.tokens.assign(size_t(count * T), 0);
  plan.cu_seqlens = {0};
  for (int64_t s = 0; s < count; ++s) {
    for (int64_t j = 0; j < T; ++j) plan.positions.push_back(int32_t(j));
    plan.cu_seqlens.push_back(int32_t((s + 1) * T));
    plan.pooled.push_back(int32_t((s + 1) * T - 1));
  }
  plan.max_seqlen = int32_t(T);
  plan.padded_tokens = model::padded_token_rows(count * T);
  return plan;
}
model::TokenPlan one_sequence(int64_t T) { return sequences(1, T); }

// Seconds per call of f, timed z.reps calls at a time with the backend synchronised after them.
template <class F, class B = void (*)()>
double time_reps(DeviceOps& ops, const Sizes& z, double budget, F&& f, B&& before = [] {}) {
  const double s = time_per_call(
      [&] {
        for (int i = 0; i < z.reps; ++i) f();
        ops.synchronize();
      },
      budget, before);
  return s / z.reps;
}

// Evicts the CPU's caches (writes 64 MiB): a model's GEMM finds its inputs and weights in memory, written by
// other ops since, not in the cache a repeated call leaves them in. A no-op for device memory.
struct CacheEvictor {
  std::vector<char> junk;
  explicit CacheEvictor(bool host) : junk(host ? size_t(64) << 20 : 0) {}
  void operator()() {
    for (size_t i = 0; i < junk.size(); i += 64) junk[i] = char(junk[i] + 1);
  }
};

// Token counts the projections are measured at: a CPU rank's micro-batches and a GPU's.
std::vector<int64_t> gemm_token_counts(const DeviceOps& ops) {
  if (ops.host_addressable()) return {256, 1024, 4096};
  return {512, 2048, 8192, 32768};
}

// time_scale: each measurement's seconds as a share of its usual (1, or kQuickTimeScale under --quick).
ComputeProfile measure_compute(DeviceOps& ops, TrackingAllocator& alloc, model::ModelOps& mo,
                               const std::vector<std::pair<int64_t, int64_t>>& shapes, double time_scale) {
  const Sizes z = sizes_for(ops);
  auto timed = [&](double seconds, auto&& f, auto&&... before) {  // seconds per call, over time_scale x seconds
    return time_reps(ops, z, seconds * time_scale, f, before...);
  };
  ComputeProfile p;
  p.assumed = false;
  p.device = ops.host_addressable() ? "cpu" : "gpu";
  p.cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  const int64_t T = z.tokens, K = z.features, N = z.features;
  const model::TokenPlan plan = one_sequence(T);
  mo.begin_batch(plan, {128, 1e6});
  {  // GEMM: the model's linear forward (y = x w^T) in its activation dtype
    const DType t = mo.activation_dtype();
    const Buffer x = filled_buffer(alloc, ops, size_t(T * K), t), w = filled_buffer(alloc, ops, size_t(N * K), t);
    const Buffer y(alloc, size_t(T * N), t, MemCategory::Other);
    const model::TensorRef xr(x.data(), t, {T, K}), wr(w.data(), t, {N, K}), yr(y.data(), t, {T, N});
    p.gemm_flops = 2.0 * double(T) * double(K) * double(N) / timed(2.0, [&] { mo.linear_forward(xr, wr, yr); });
  }
  CacheEvictor evict(ops.host_addressable());
  for (const auto& [in, out] : shapes)  // the config's own projections, by token count, from cold caches
    for (const int64_t tokens : gemm_token_counts(ops)) {
      const DType t = mo.activation_dtype();
      const model::TokenPlan rows = one_sequence(tokens);  // begin_batch keeps a reference
      mo.begin_batch(rows, {128, 1e6});
      const Buffer x = filled_buffer(alloc, ops, size_t(tokens * in), t), w = filled_buffer(alloc, ops, size_t(out * in), t);
      const Buffer y = filled_buffer(alloc, ops, size_t(tokens * out), t), dx(alloc, size_t(tokens * in), t, MemCategory::Other);
      const Buffer dw(alloc, size_t(out * in), t, MemCategory::Other);
      const model::TensorRef xr(x.data(), t, {tokens, in}), wr(w.data(), t, {out, in}), yr(y.data(), t, {tokens, out}),
          dxr(dx.data(), t, {tokens, in}), dwr(dw.data(), t, {out, in});
      const double flops = 2.0 * double(tokens) * double(in) * double(out);
      p.gemm_rates.push_back({tokens, in, out,
                              {flops / timed(0.2, [&] { mo.linear_forward(xr, wr, yr); }, evict),
                               flops / timed(0.2, [&] { mo.linear_input_grad(yr, wr, dxr, false); }, evict),
                               flops / timed(0.2, [&] { mo.linear_weight_grad(xr, yr, dwr); }, evict)}});
    }
  {  // Attention: the model's forward and backward (model.attention's kind) over sequences of Qwen3 head shapes
     // (CPU: 4 x 256 tokens, 8 query and 4 kv heads of 64; GPU: 2 x 2048 tokens, Qwen3-4B's 32 and 8 heads of
     // 128), in attention_flops()'s counting.
    const bool cpu = ops.host_addressable();
    const model::AttentionShape s = cpu ? model::AttentionShape{8, 4, 64} : model::AttentionShape{32, 8, 128};
    const int64_t len = cpu ? 256 : 2048, count = cpu ? 4 : 2;
    const model::TokenPlan seqs = sequences(count, len);
    mo.begin_batch(seqs, {s.head_dim, 1e6});
    const DType t = mo.activation_dtype();
    const int64_t rows = mo.token_rows(seqs), qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
    auto act = [&](int64_t width) { return filled_buffer(alloc, ops, size_t(rows * width), t); };
    const Buffer q = act(qw), k = act(kw), v = act(kw), o = act(qw), d_o = act(qw), dq = act(qw), dk = act(kw),
                 dv = act(kw), lse = filled_buffer(alloc, ops, size_t(rows * s.heads), DType::F32);
    auto ref = [&](const Buffer& b, int64_t width, DType dt) { return model::TensorRef(b.data(), dt, {rows, width}); };
    const double secs = timed(2.0, [&] {
      mo.attention_forward(ref(q, qw, t), ref(k, kw, t), ref(v, kw, t), s, ref(o, qw, t), ref(lse, s.heads, DType::F32));
      mo.attention_backward(ref(q, qw, t), ref(k, kw, t), ref(v, kw, t), ref(o, qw, t), ref(d_o, qw, t),
                            ref(lse, s.heads, DType::F32), s, ref(dq, qw, t), ref(dk, kw, t), ref(dv, kw, t));
    });
    p.attention_flops =
        model::attention_flops(double(count) * double(len) * double(len + 1) / 2, double(qw),
                               model::kAttentionForwardBackwardPasses) / secs;
  }
  // Element-wise: the model's memory-bound element-wise ops at a layer's width (H features, as many token
  // rows as fill the arrays): the residual add (fp32: out = a + b) and RMSNorm (fp32 in, the activation
  // dtype out), bytes read and written per second over the two; the planner prices activation passes and the
  // engine's gradient work in these bytes. SwiGLU (silu's exponential per element) is timed apart.
  const size_t m = z.elements;
  const int64_t H = z.features, R = int64_t(m) / H;
  const model::TokenPlan rows = one_sequence(R);
  mo.begin_batch(rows, {128, 1e6});
  const DType t = mo.activation_dtype();
  const double tb = double(dtype_size(t));
  const Buffer a = filled_buffer(alloc, ops, m, DType::F32), b = filled_buffer(alloc, ops, m, DType::F32);
  const Buffer c(alloc, m, DType::F32, MemCategory::Other);
  const model::TensorRef ar(a.data(), DType::F32, {R, H}), br(b.data(), DType::F32, {R, H}),
      cr(c.data(), DType::F32, {R, H});
  {
    const Buffer g = filled_buffer(alloc, ops, m, t), u = filled_buffer(alloc, ops, m, t);
    const Buffer out(alloc, m, t, MemCategory::Other), dg(alloc, m, t, MemCategory::Other), du(alloc, m, t, MemCategory::Other);
    const Buffer w = filled_buffer(alloc, ops, size_t(H), t), rstd(alloc, size_t(R), DType::F32, MemCategory::Other);
    const model::TensorRef gr(g.data(), t, {R, H}), ur(u.data(), t, {R, H}), outr(out.data(), t, {R, H}),
        dgr(dg.data(), t, {R, H}), dur(du.data(), t, {R, H}), wr(w.data(), t, {H}), rr(rstd.data(), DType::F32, {R});
    const double t_add = timed(1.0, [&] { mo.add(ar, br, cr); });
    const double t_norm = timed(1.0, [&] { mo.rmsnorm_forward(ar, wr, 1e-6f, outr, rr); });
    p.elementwise_bytes = (12.0 + 4.0 + tb) * double(m) / (t_add + t_norm);
    p.swiglu_forward_elements = double(m) / timed(1.0, [&] { mo.swiglu_forward(gr, ur, outr); });
    p.swiglu_backward_elements = double(m) / timed(1.0, [&] { mo.swiglu_backward(gr, ur, outr, dgr, dur); });
  }
  // The engine's AdamW step over a shard of m elements (param, grad, m, v: square roots and divisions make it
  // slower than memory on a CPU core).
  const Buffer v(alloc, m, DType::F32, MemCategory::Other);
  ops.zero(c.data(), DType::F32, m);
  ops.zero(v.data(), DType::F32, m);
  const optim::AdamWConfig cfg;
  int64_t step = 0;
  p.adamw_elements = double(m) / timed(1.0, [&] {
                       ops.adamw(a.as<float>(), b.data(), DType::F32, c.as<float>(), v.as<float>(), m, cfg, 1e-5f,
                                 ++step, true, 1.0f);
                     });
  // The engine's gradient work on a micro-step's view of m elements in the model's dtype (its parameters'):
  // the non-finite count (into a device counter, as the engine's) and the add into an fp32 accumulator. On a GPU
  // only: on a CPU the loop repeated over the same buffers ran at 86.7 GB/s on one thread here (2026-12-02, 64M
  // elements) where a real step's grad_buckets moved about 50 GB/s (a 90M-parameter model, two micro-steps, 0.053-
  // 0.063 s at one thread: bench/results/cpu_threads_20261201c.txt), nearer the add + RMSNorm rate (52 GB/s), so a
  // CPU profile keeps pricing it at elementwise_bytes, against which the CPU accuracy grid was measured.
  if (!ops.host_addressable()) {
    const DType pt = mo.activation_dtype();
    const Buffer grad = filled_buffer(alloc, ops, m, pt), counter(alloc, 1, DType::F64, MemCategory::Other);
    ops.zero(counter.data(), DType::F64, 1);
    const size_t one_run[] = {m};  // the engine's call (Engine::count_nonfinite), here one tensor's run
    const double secs = timed(1.0, [&] {
      ops.accumulate_nonfinite_runs(grad.data(), pt, one_run, 1, counter.as<double>(),
                                    std::numeric_limits<float>::infinity());
      ops.add(a.data(), DType::F32, grad.data(), pt, m);
    });
    p.gradient_bytes = (traffic::finite_count(pt) + traffic::accumulate(pt, DType::F32, false)) * double(m) / secs;
  }
  return p;
}

// The engine's collectives as it issues them: a bucket of kChunks messages of sizes_for()'s elements in fp32,
// started with at most kReductionsInFlight on the wire (the oldest waited before the next starts), for an
// all-reduce, a reduce-scatter and an all-gather each; the slowest rank's time, median of 5 rounds after a
// warm-up (this machine's ranks lose their cores now and then: a best-of would be the lucky round); elements
// a second in comm_report()'s counting. Collective: every rank of `comm` calls it.
ComputeProfile::CollectiveRates measure_collectives(Communicator& comm, DeviceOps& ops, TrackingAllocator& alloc) {
  constexpr size_t kChunks = 8;
  const size_t W = size_t(comm.world());
  const size_t shard = sizes_for(ops).message / W, n = shard * W;
  Buffer a = filled_buffer(alloc, ops, kChunks * n, DType::F32), b = filled_buffer(alloc, ops, kChunks * shard, DType::F32);
  auto rate = [&](double counted_per_chunk, auto&& start) {  // start(i) -> the handle of chunk i
    std::vector<double> rounds;
    for (int round = 0; round < 6; ++round) {
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      std::deque<CommHandle> on_wire;
      for (size_t i = 0; i < kChunks; ++i) {
        if (on_wire.size() == size_t(kReductionsInFlight)) on_wire.front()->wait(), on_wire.pop_front();
        on_wire.push_back(start(i));
      }
      for (CommHandle& h : on_wire) h->wait();
      ops.synchronize();
      double secs = seconds_since(t0);
      comm.all_reduce_scalars(&secs, 1, ReduceOp::Max);
      if (round > 0) rounds.push_back(std::max(secs, 1e-9));  // an in-place all-reduce at one rank does nothing
    }
    std::sort(rounds.begin(), rounds.end());
    return counted_per_chunk * double(kChunks) / rounds[rounds.size() / 2];
  };
  auto chunk = [](const Buffer& buf, size_t i, size_t count) { return static_cast<float*>(buf.data()) + i * count; };
  ComputeProfile::CollectiveRates r;
  r.all_reduce = rate(double(2 * n), [&](size_t i) { return comm.all_reduce_async(chunk(a, i, n), n, DType::F32, ReduceOp::Sum); });
  r.reduce_scatter = rate(double(n), [&](size_t i) {
    return comm.reduce_scatter_async(chunk(a, i, n), chunk(b, i, shard), shard, DType::F32, ReduceOp::Sum);
  });
  r.all_gather = rate(double(n), [&](size_t i) { return comm.all_gather_async(chunk(b, i, shard), chunk(a, i, n), shard, DType::F32); });
  return r;
}
}  // namespace

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
  Config cfg = a.config_path.empty() ? parse_config("{}", "pmtrain calibrate", a.overrides)
                                     : load_config(existing_path(a.config_path, "config file"), a.overrides);
  if (a.threads > 0) {
    cfg.threads = a.threads;
    cfg.threads_from = ThreadsFrom::Config;
  }
  resolve_shard_ranks(cfg, node_block_ranks(mpi.info().node_of_rank));
  resolve_rank_threads(cfg, mpi.info().local_world);
  const int threads = int(cfg.threads);
  const std::unique_ptr<MpiCommunicator> world = mpi.world_communicator();
  BackendParts parts = make_backend(cfg, *world);
  Communicator& comm = parts.engine_comm ? *parts.engine_comm : *world;
  const int W = comm.world();
  const ComputeProfile::CollectiveRates coll = measure_collectives(comm, *parts.ops, *parts.alloc);
  if (world->rank() != 0) return 0;
  std::unique_ptr<model::ModelOps> cpu_model_ops;
  model::ModelOps& mo = parts.model_ops ? *parts.model_ops : *(cpu_model_ops = model::make_cpu_model_ops(model::AttentionKind::Auto, threads));
  // With a config: its model's projection shapes too (the planner prices each GEMM at its own shape's rate).
  const std::vector<std::pair<int64_t, int64_t>> shapes =
      a.config_path.empty() ? std::vector<std::pair<int64_t, int64_t>>{} : projection_shapes(resolve_model_config(cfg.model, 1));
  ComputeProfile p = measure_compute(*parts.ops, *parts.alloc, mo, shapes, a.quick ? kQuickTimeScale : 1.0);
  p.threads = threads;
  const std::string host = host_name("this machine");
  p.source = p.device == "cpu" ? fmt::format("measured on {} ({} thread{})", host, threads, threads == 1 ? "" : "s")
                               : fmt::format("measured on {} ({})", host, parts.description);
  if (a.quick) p.source += ", --quick";  // the plan names its profile's source: a rough one says so
  if (!a.out.empty() && std::filesystem::exists(a.out)) {  // keep the other world sizes' rates of this device
    try {
      const ComputeProfile old = load_profile(a.out);
      if (old.device == p.device) p.collectives = old.collectives;
    } catch (const ConfigError&) {
      // not a profile (or an older one): written anew
    }
  }
  p.collectives[W] = coll;
  const Sizes z = sizes_for(*parts.ops);
  const char* dtype = dtype_name(mo.activation_dtype());
  printf("calibrate: %s\n  GEMM (the model's linear forward, %lld tokens x %lld -> %lld, %s): %.1f GFLOP/s\n"
         "  attention (the model's forward and backward, counted as the planner counts it): %.1f GFLOP/s\n"
         "  element-wise (the model's residual add and RMSNorm, %zu M elements): %.1f GB/s; SwiGLU forward %.0f, "
         "backward %.0f M elements/s\n"
         "  AdamW step: %.0f M elements/s; the engine's gradient work (non-finite count + add into fp32): %.1f GB/s\n"
         "  collectives at %d rank%s (%s, %zu M-element fp32 messages, %d on the wire "
         "at once, M elements/s as counted): all-reduce %.0f, reduce-scatter %.0f, all-gather %.0f\n",
         p.source.c_str(), (long long)z.tokens, (long long)z.features, (long long)z.features, dtype, p.gemm_flops / 1e9,
         p.attention_flops / 1e9, z.elements >> 20, p.elementwise_bytes / 1e9, p.swiglu_forward_elements / 1e6,
         p.swiglu_backward_elements / 1e6, p.adamw_elements / 1e6, p.gradient_bytes / 1e9, W, W == 1 ? "" : "s",
         comm.backend_name(), z.message >> 20, kReductionsInFlight, coll.all_reduce / 1e6, coll.reduce_scatter / 1e6, coll.all_gather / 1e6);
  for (size_t i = 0; i < p.gemm_rates.size(); ++i) {
    const ComputeProfile::GemmRate& r = p.gemm_rates[i];
    if (i == 0 || p.gemm_rates[i - 1].in != r.in || p.gemm_rates[i - 1].out != r.out)
      printf("%s  GEMM %lld -> %lld (the config's projection), GFLOP/s forward / input grad / weight grad by tokens:",
             i ? "\n" : "", (long long)r.in, (long long)r.out);
    printf(" %lld: %.1f/%.1f/%.1f", (long long)r.tokens, r.flops[0] / 1e9, r.flops[1] / 1e9, r.flops[2] / 1e9);
  }
  if (!p.gemm_rates.empty()) printf("\n");
  if (!a.out.empty()) {
    std::ofstream file;
    std::ostream& out = out_stream(a.out, file);
    out << p.to_json().dump(2) << "\n";
    finish_out(out, file, a.out);
    printf("wrote %s (use it with `pmtrain plan CONFIG --profile %s`)\n", a.out.c_str(), a.out.c_str());
  }
  return 0;
}

}  // namespace zero::pmtrain
