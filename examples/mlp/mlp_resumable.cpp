#include "examples/mlp/mlp_resumable.h"

#include "core/check.h"

namespace zero::example {

void train_from_step(const MlpModel& model, Engine& engine, const MlpDataset& data, int64_t G, int64_t m,
                     int first_step, int last_step, const std::function<void(const StepLog&)>& on_step) {
  Communicator& comm = engine.comm();
  const int W = comm.world(), r = comm.rank();
  const int k = engine.config().accum_steps;
  ZERO_REQUIRE(G == m * k * W, ConfigError, "global {} != micro {} x accum {} x world {}", G, m, k, W);
  const int d = model.input_dim(), N = data.size();
  EngineMlpParams params(engine);
  std::vector<float> x(size_t(m) * d), t(m);
  for (int s = first_step; s < last_step; ++s) {
    double loss = 0;
    for (int i = 0; i < k; ++i) {
      for (int64_t j = 0; j < m; ++j) {  // the same global sample order as train_with_engine
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
    comm.all_reduce_scalars(&loss, 1, ReduceOp::Sum);
    log.loss = loss / double(G);
    if (on_step) on_step(log);
  }
}

}  // namespace zero::example
