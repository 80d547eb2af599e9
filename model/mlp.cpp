// SwiGLU MLP forward/backward.
#include "model/mlp.h"

#include <cmath>

namespace zero::model {

namespace {
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}  // namespace

void mlp_forward(const MlpWeights& w, int64_t hidden, int64_t inter, const Mat& x, Mat& y, MlpCache& c) {
  linear_forward(w.gate, inter, hidden, x, c.g);
  linear_forward(w.up, inter, hidden, x, c.u);
  c.m.resize(inter, x.cols());
  const float* g = c.g.data();
  const float* u = c.u.data();
  float* m = c.m.data();
  for (int64_t i = 0, n = c.m.size(); i < n; ++i) m[i] = g[i] * sigmoid(g[i]) * u[i];  // silu(g) * u
  linear_forward(w.down, hidden, inter, c.m, y);
}

void mlp_backward(const MlpWeights& w, const MlpGrads& gw, int64_t hidden, int64_t inter, const Mat& x,
                  const MlpCache& c, const Mat& dy, Mat& dx) {
  Mat dm;
  linear_backward(w.down, hidden, inter, c.m, dy, gw.down, dm, false);  // dm [I, N]
  Mat dg(inter, x.cols()), du(inter, x.cols());
  const float* g = c.g.data();
  const float* u = c.u.data();
  for (int64_t i = 0, n = dm.size(); i < n; ++i) {
    const float sg = sigmoid(g[i]);
    const float silu = g[i] * sg;
    du.data()[i] = dm.data()[i] * silu;
    dg.data()[i] = dm.data()[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg));  // silu'(g)
  }
  linear_backward(w.gate, inter, hidden, x, dg, gw.gate, dx, false);
  linear_backward(w.up, inter, hidden, x, du, gw.up, dx, true);
}

}  // namespace zero::model
