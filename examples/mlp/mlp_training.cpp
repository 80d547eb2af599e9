#include "examples/mlp/mlp_training.h"

#include <cmath>

#include "core/check.h"

namespace zero::example {

std::vector<StepLog> train_with_engine(const MlpModel& model, Engine& engine, const MlpDataset& data,
                                       int64_t G, int64_t m, int steps,
                                       const std::function<void(const StepLog&)>& on_step) {
  std::vector<StepLog> logs;
  train_from_step(model, engine, data, G, m, 0, steps, [&](const StepLog& l) {
    logs.push_back(l);
    if (on_step) on_step(l);
  });
  return logs;
}

void train_from_step(const MlpModel& model, Engine& engine, const MlpDataset& data, int64_t G, int64_t m,
                     int first_step, int last_step, const std::function<void(const StepLog&)>& on_step) {
  // Data parallelism is over every rank: under hybrid sharding the engine's communicator is one shard group.
  const int W = engine.data_world(), r = engine.data_rank();
  const int k = engine.config().accum_steps;
  ZERO_REQUIRE(G == m * k * W, ConfigError, "global {} != micro {} x accum {} x world {}", G, m, k, W);
  const int d = model.input_dim(), N = data.size();
  EngineMlpParams params(engine);
  std::vector<float> x(size_t(m) * d), t(m);
  for (int s = first_step; s < last_step; ++s) {
    double loss = 0;
    for (int i = 0; i < k; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        const int64_t idx = (int64_t(s) * G + (int64_t(i) * W + r) * m + j) % N;
        std::copy_n(&data.x[size_t(idx) * d], d, &x[size_t(j) * d]);
        t[j] = data.t[idx];
      }
      engine.begin_micro_step();
      loss += model.forward_backward(params, x.data(), t.data(), int(m));
    }
    StepLog log;
    log.step = s + 1;
    log.result = engine.step(double(G));
    engine.comm().all_reduce_scalars(&loss, 1, ReduceOp::Sum);
    if (Communicator* across = engine.replicas()) across->all_reduce_scalars(&loss, 1, ReduceOp::Sum);
    log.loss = loss / double(G);
    if (on_step) on_step(log);
  }
}

ReferenceRun train_reference(const MlpModel& model, const MlpDataset& data, int64_t G, int steps,
                             const optim::AdamWConfig& adamw, const optim::LrSchedule& schedule, float clip_norm) {
  ReferenceRun run{model.dense_init(), {}, {}};
  auto& p = run.params;
  std::vector<std::vector<std::vector<float>>> m = p.params, v = p.params;
  for (auto& g : m) for (auto& t : g) std::fill(t.begin(), t.end(), 0.0f);
  for (auto& g : v) for (auto& t : g) std::fill(t.begin(), t.end(), 0.0f);
  const int d = model.input_dim(), N = data.size();
  std::vector<float> x(size_t(G) * d), t(G);
  for (int s = 0; s < steps; ++s) {
    for (int64_t j = 0; j < G; ++j) {
      const int64_t idx = (int64_t(s) * G + j) % N;
      std::copy_n(&data.x[size_t(idx) * d], d, &x[size_t(j) * d]);
      t[j] = data.t[idx];
    }
    const double loss = model.forward_backward(p, x.data(), t.data(), int(G));
    double sq = 0;
    for (auto& g : p.grads) for (auto& tn : g) for (float e : tn) sq += double(e) * e;
    const double norm = std::sqrt(sq) / double(G);
    run.losses.push_back(loss / double(G));
    run.grad_norms.push_back(norm);
    const float coef = clip_norm > 0 ? float(std::min(1.0, clip_norm / (norm + 1e-6))) : 1.0f;
    const float lr = schedule.lr_at(s + 1);
    for (size_t g = 0; g < p.params.size(); ++g)
      for (size_t tn = 0; tn < p.params[g].size(); ++tn)
        optim::adamw_step(p.params[g][tn].data(), p.grads[g][tn].data(), m[g][tn].data(), v[g][tn].data(),
                          p.params[g][tn].size(), adamw, lr, s + 1, model.groups()[g].tensors[tn].weight_decay,
                          float(coef / double(G)));
  }
  return run;
}

std::vector<float> flatten(const DenseMlpParams& p) {
  std::vector<float> out;
  for (auto& g : p.params) for (auto& t : g) out.insert(out.end(), t.begin(), t.end());
  return out;
}

std::vector<float> full_parameters(Engine& engine) {
  std::vector<float> out;
  for (int g = 0; g < int(engine.groups().size()); ++g) {
    auto f = engine.full_master(g);
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

}  // namespace zero::example
