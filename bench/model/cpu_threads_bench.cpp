// The CPU backend's products cut into fixed tiles (model/cpu/parallel.h, the same bits at any thread count)
// against the baseline it replaced, measured in the same run: one Eigen product threaded by Eigen (whose
// bits change with the thread count). A linear layer's three products at Qwen3-0.6B's MLP shapes (hidden
// 1024, intermediate 3072) on a micro-batch of tokens, at 1 thread and at --threads; the best of a few
// calls each, the two taken in turns. Prints each product's time both ways and the ratio (baseline / tiled: above 1 is faster).
// Then the backend's row-wise ops whose work is cut across threads apart from the products (a layer's RMSNorm
// backward over hidden, q/k-norm + RoPE forward and backward over 16 heads of 128) at --threads against the
// same op at 1 thread, in turns: the ratio is the speed-up. Last the engine's element-wise ops on the CPU
// backend (zero/device_ops.h: AdamW and the gradient accumulator's add over a shard of 8 Mi elements) the same
// way.
//   cpu_threads_bench [--threads 2] [--tokens 1024] [--hidden 1024] [--inter 3072]
#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "model/cpu/cpu_model_ops.h"
#include "model/token_plan.h"
#include "optim/adamw.h"
#include "zero/device_ops.h"

using namespace zero;
using namespace zero::model;

namespace {
using Mat = Eigen::MatrixXf;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The best call of a and of b, taken in turns (a, b, a, b, ...) for at least 2 s and 5 rounds, so that a
// slower spell of a shared machine falls on both.
std::pair<double, double> best_of_turns(const std::function<void()>& a, const std::function<void()>& b) {
  a();  // warm up: page faults, packing buffers
  b();
  double ba = 1e30, bb = 1e30;
  const auto start = std::chrono::steady_clock::now();
  for (int n = 0; n < 5 || std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 2.0; ++n) {
    ba = std::min(ba, seconds_of(a));
    bb = std::min(bb, seconds_of(b));
  }
  return {ba, bb};
}
}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int64_t T = 1024, H = 1024, I = 3072;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (a == "--threads") threads = int(v);
    else if (a == "--tokens") T = v;
    else if (a == "--hidden") H = v;
    else if (a == "--inter") I = v;
    else {
      fprintf(stderr, "cpu_threads_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const int64_t in = H, out = 2 * I;  // the fused gate/up projection
  std::vector<float> x(size_t(T * in)), w(size_t(out * in)), dy(size_t(T * out)), y(size_t(T * out)),
      dx(size_t(T * in)), dw(size_t(out * in));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) / 17 - 0.5f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 13) / 13 - 0.5f;
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = float(i % 11) / 11 - 0.5f;
  TokenPlan plan;
  plan.tokens.assign(size_t(T), 0);
  plan.positions.assign(size_t(T), 0);
  plan.cu_seqlens = {0, int32_t(T)};
  auto ref = [](std::vector<float>& v, std::initializer_list<int64_t> shape) { return TensorRef(v.data(), DType::F32, shape); };

  printf("cpu_threads_bench: linear %lld -> %lld on %lld tokens (fp32)\n", (long long)in, (long long)out, (long long)T);
  printf("%-8s %-14s %12s %12s %8s\n", "threads", "product", "eigen ms", "tiled ms", "ratio");
  for (const int t : {1, threads}) {
    // Baseline: one Eigen product, Eigen's threads.
    const Eigen::Map<const RowMat> W(w.data(), out, in);
    const Eigen::Map<const Mat> X(x.data(), in, T), DY(dy.data(), out, T);
    Eigen::Map<Mat> Y(y.data(), out, T), DX(dx.data(), in, T);
    Eigen::Map<RowMat> DW(dw.data(), out, in);
    // Tiled: the CPU backend's ops at t threads. Making them turns Eigen's own threading off, so the baseline
    // turns it back on before each of its calls.
    const auto ops = make_cpu_model_ops(AttentionKind::Auto, t);
    ops->begin_batch(plan, {64, 1e6});
    const std::pair<double, double> runs[3] = {
        best_of_turns([&] { Eigen::setNbThreads(t); Y.noalias() = W * X; },
                      [&] { Eigen::setNbThreads(1); ops->linear_forward(ref(x, {T, in}), ref(w, {out, in}), ref(y, {T, out})); }),
        best_of_turns([&] { Eigen::setNbThreads(t); DX.noalias() = W.transpose() * DY; },
                      [&] { Eigen::setNbThreads(1); ops->linear_input_grad(ref(dy, {T, out}), ref(w, {out, in}), ref(dx, {T, in}), false); }),
        best_of_turns([&] { Eigen::setNbThreads(t); DW.noalias() = DY * X.transpose(); },
                      [&] { Eigen::setNbThreads(1); ops->linear_weight_grad(ref(x, {T, in}), ref(dy, {T, out}), ref(dw, {out, in})); })};
    const double base[3] = {runs[0].first, runs[1].first, runs[2].first};
    const double tiled[3] = {runs[0].second, runs[1].second, runs[2].second};
    const char* names[3] = {"forward", "input grad", "weight grad"};
    double sb = 0, st = 0;
    for (int i = 0; i < 3; ++i) {
      printf("%-8d %-14s %12.2f %12.2f %7.2fx\n", t, names[i], base[i] * 1e3, tiled[i] * 1e3, base[i] / tiled[i]);
      sb += base[i];
      st += tiled[i];
    }
    printf("%-8d %-14s %12.2f %12.2f %7.2fx\n", t, "all three", sb * 1e3, st * 1e3, sb / st);
  }

  const int64_t heads = 16, d = 128;
  const auto n = [](int64_t count) { return static_cast<size_t>(count); };
  std::vector<float> rstd(n(T)), nx(n(T * H)), q(n(T * heads * d)), qy(q.size()), dq(q.size()), qdx(q.size()),
      qrstd(n(T * heads)), nw(n(H), 1.0f), qw(n(d), 1.0f), ndw(n(H)), qdw(n(d));
  for (size_t i = 0; i < nx.size(); ++i) nx[i] = float(i % 19) / 19 - 0.5f;
  for (size_t i = 0; i < q.size(); ++i) q[i] = float(i % 23) / 23 - 0.5f;
  for (size_t i = 0; i < dq.size(); ++i) dq[i] = float(i % 7) / 7 - 0.5f;
  for (int64_t t = 0; t < T; ++t) plan.positions[size_t(t)] = int32_t(t);
  const auto one = make_cpu_model_ops(AttentionKind::Auto, 1), many = make_cpu_model_ops(AttentionKind::Auto, threads);
  one->begin_batch(plan, {d, 1e6});
  many->begin_batch(plan, {d, 1e6});
  one->rmsnorm_forward(ref(nx, {T, H}), ref(nw, {H}), 1e-6f, ref(dx, {T, H}), ref(rstd, {T}));
  one->qk_norm_rope_forward(ref(q, {T, heads * d}), ref(qw, {d}), 1e-6f, ref(qy, {T, heads * d}), ref(qrstd, {T * heads}));
  using OpOf = std::function<void(ModelOps&)>;
  const std::pair<const char*, OpOf> ops[3] = {
      {"rmsnorm bwd",
       [&](ModelOps& o) { o.rmsnorm_backward(ref(nx, {T, H}), ref(nw, {H}), ref(rstd, {T}), ref(dx, {T, H}), ref(y, {T, H}), ref(ndw, {H})); }},
      {"qk-norm+rope",
       [&](ModelOps& o) { o.qk_norm_rope_forward(ref(q, {T, heads * d}), ref(qw, {d}), 1e-6f, ref(qy, {T, heads * d}), ref(qrstd, {T * heads})); }},
      {"qk-n+rope bwd", [&](ModelOps& o) {
         o.qk_norm_rope_backward(ref(q, {T, heads * d}), ref(qw, {d}), ref(qrstd, {T * heads}), ref(dq, {T, heads * d}),
                                 ref(qdx, {T, heads * d}), ref(qdw, {d}));
       }}};
  printf("\nrow-wise ops on %lld tokens (hidden %lld; %lld heads of %lld)\n", (long long)T, (long long)H, (long long)heads,
         (long long)d);
  printf("%-14s %12s %12s %8s\n", "op", "1 thread ms", "threads ms", "ratio");
  for (const auto& [name, op] : ops) {
    const auto [a, b] = best_of_turns([&] { op(*one); }, [&] { op(*many); });
    printf("%-14s %12.2f %12.2f %7.2fx\n", name, a * 1e3, b * 1e3, a / b);
  }

  const size_t shard = size_t(8) << 20;
  std::vector<float> param(shard, 0.5f), grad(shard, 1e-3f), m(shard), v(shard), accum(shard);
  const auto ops1 = make_cpu_ops(1), opsN = make_cpu_ops(threads);
  const optim::AdamWConfig adamw_config;
  int64_t step = 0;
  using EngineOp = std::function<void(DeviceOps&)>;
  const std::pair<const char*, EngineOp> engine_ops[2] = {
      {"adamw", [&](DeviceOps& o) {
         o.adamw(param.data(), grad.data(), DType::F32, m.data(), v.data(), shard, adamw_config, 1e-5f, ++step, true, 1.0f);
       }},
      {"accumulate", [&](DeviceOps& o) { o.add(accum.data(), DType::F32, grad.data(), DType::F32, shard); }}};
  printf("\nengine element-wise ops on %zu elements (fp32)\n", shard);
  printf("%-14s %12s %12s %8s\n", "op", "1 thread ms", "threads ms", "ratio");
  for (const auto& [name, op] : engine_ops) {
    const auto [a, b] = best_of_turns([&] { op(*ops1); }, [&] { op(*opsN); });
    printf("%-14s %12.2f %12.2f %7.2fx\n", name, a * 1e3, b * 1e3, a / b);
  }
  return 0;
}
