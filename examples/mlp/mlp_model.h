// A small real model for proving the engine without Qwen3: a tanh MLP with groups of uneven sizes,
// including a 5-element scale vector (smaller than most world sizes, so it lives on padding), and a
// synthetic regression dataset. It is also the example of embedding the engine in one's own trainer.
//
//   x[n, d0] -> tanh(x W0^T + b0) -> ... -> tanh(. W_{L-1}^T + b_{L-1}) -> (. * s) -> . w^T + b -> y[n]
//   loss = sum over samples of 0.5 (y - t)^2   (the engine divides by the global sample count)
#pragma once
#include <cstdint>
#include <vector>

#include "zero/engine.h"

namespace zero::example {

struct MlpSpec {
  std::vector<int> dims = {12, 24, 18, 5};  // input, hidden..., last hidden (= scale width)
  uint64_t seed = 1234;
  bool splittable = false;  // let the engine hand out groups larger than a bucket in pieces
};

// Where the MLP's parameters come from and its gradients go, group by group, in fp32.
class MlpParams {
 public:
  virtual ~MlpParams() = default;
  virtual std::vector<std::vector<float>> load(int g) = 0;  // one vector per tensor
  virtual void done(int g) = 0;
  virtual void begin_backward() = 0;
  virtual void store_grad(int g, const std::vector<std::vector<float>>& grads) = 0;
};

// MlpParams over the engine: gather/release, grad_view/grad_ready (or, for a group the engine split,
// its pieces), dtype conversion both ways through the backend's host copies.
class EngineMlpParams final : public MlpParams {
 public:
  explicit EngineMlpParams(Engine& e) : e_(e) {}
  std::vector<std::vector<float>> load(int g) override;
  void done(int g) override;
  void begin_backward() override { e_.begin_backward(); }
  void store_grad(int g, const std::vector<std::vector<float>>& grads) override;

 private:
  Engine& e_;
};

// Plain full fp32 parameters and gradients (the single-process reference).
class DenseMlpParams final : public MlpParams {
 public:
  std::vector<std::vector<std::vector<float>>> params, grads;  // [group][tensor][numel]
  std::vector<std::vector<float>> load(int g) override { return params[g]; }
  void done(int) override {}
  void begin_backward() override {}
  void store_grad(int g, const std::vector<std::vector<float>>& gr) override { grads[g] = gr; }
};

class MlpModel {
 public:
  explicit MlpModel(MlpSpec spec);
  const std::vector<GroupInfo>& groups() const { return groups_; }
  int num_groups() const { return int(groups_.size()); }
  // Deterministic initial value of tensor t of group g (same on every rank).
  void init(int g, int t, float* dst) const;
  DenseMlpParams dense_init() const;
  // Forward and backward over n samples (x row-major [n, d0], targets t[n]); returns the summed loss.
  // With an engine-backed MlpParams the caller wraps this in begin_micro_step().
  double forward_backward(MlpParams& p, const float* x, const float* t, int n) const;
  int input_dim() const { return spec_.dims.front(); }

 private:
  MlpSpec spec_;
  std::vector<GroupInfo> groups_;
  int hidden_layers() const { return int(spec_.dims.size()) - 1; }
};

// Synthetic regression data: x ~ U(-1, 1)^d, t = sin(x . u) + 0.5 cos(x . v), fixed by a seed.
struct MlpDataset {
  int dim = 0;
  std::vector<float> x, t;
  MlpDataset(int n, int dim, uint64_t seed);
  int size() const { return int(t.size()); }
};

}  // namespace zero::example
