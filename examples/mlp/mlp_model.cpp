#include "examples/mlp/mlp_model.h"

#include <Eigen/Core>
#include <cmath>
#include <random>

#include "core/check.h"

namespace zero::example {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapM = Eigen::Map<Mat>;
using CMapM = Eigen::Map<const Mat>;
using CMapV = Eigen::Map<const Eigen::RowVectorXf>;


namespace {
// Copies between a host image of a whole group (its tensors, GroupInfo order) and a piece's runs.
template <class F>
void for_each_run_in_tensors(const GroupInfo& gi, const PieceView& piece, F&& fn) {
  for (const FlatRun& run : piece.runs) {
    size_t t0 = 0;
    for (size_t t = 0; t < gi.tensors.size(); ++t) {
      const size_t t1 = t0 + gi.tensors[t].numel;
      const size_t lo = std::max(t0, run.begin), hi = std::min(t1, run.begin + run.count);
      if (lo < hi) fn(t, lo - t0, static_cast<char*>(run.data) + (lo - run.begin) * dtype_size(piece.dtype), hi - lo);
      t0 = t1;
    }
  }
}
}  // namespace

std::vector<std::vector<float>> EngineMlpParams::load(int g) {
  // The model computes on the host; the engine's memory is the backend's, so go through its copies.
  std::vector<std::vector<float>> out;
  const GroupInfo& gi = e_.groups()[g];
  if (e_.num_pieces(g) > 1) {  // a split group: gather it piece by piece into the host image
    for (const auto& t : gi.tensors) out.emplace_back(t.numel);
    for (int k = 0; k < e_.num_pieces(g); ++k) {
      const PieceView& piece = e_.gather_piece(g, k);
      for_each_run_in_tensors(gi, piece, [&](size_t t, size_t at, void* data, size_t n) {
        e_.ops().copy_to_host(out[t].data() + at, data, piece.dtype, n);
      });
      e_.release_piece(g, k);
    }
    return out;
  }
  for (const TensorView& v : e_.gather(g)) {
    out.emplace_back(v.numel);
    e_.ops().copy_to_host(out.back().data(), v.data, v.dtype, v.numel);
  }
  return out;
}

void EngineMlpParams::done(int g) {
  if (e_.num_pieces(g) == 1) e_.release(g);  // pieces were released as they were copied
}

void EngineMlpParams::store_grad(int g, const std::vector<std::vector<float>>& grads) {
  const GroupInfo& gi = e_.groups()[g];
  for (size_t t = 0; t < gi.tensors.size(); ++t)
    ZERO_CHECK(grads[t].size() == gi.tensors[t].numel, "gradient size {} != tensor size {}", grads[t].size(),
               gi.tensors[t].numel);
  if (e_.num_pieces(g) > 1) {
    for (int k = 0; k < e_.num_pieces(g); ++k) {
      const PieceView& piece = e_.grad_piece(g, k);
      for_each_run_in_tensors(gi, piece, [&](size_t t, size_t at, void* data, size_t n) {
        e_.ops().copy_from_host(data, piece.dtype, grads[t].data() + at, n);
      });
      e_.piece_ready(g, k);
    }
    return;
  }
  const GroupView& view = e_.grad_view(g);
  for (size_t t = 0; t < view.size(); ++t) e_.ops().copy_from_host(view[t].data, view[t].dtype, grads[t].data(), view[t].numel);
  e_.grad_ready(g);
}

MlpModel::MlpModel(MlpSpec spec) : spec_(std::move(spec)) {
  ZERO_REQUIRE(spec_.dims.size() >= 2, ConfigError, "mlp: need at least an input and one hidden width");
  for (int l = 0; l < hidden_layers(); ++l) {
    const size_t in = spec_.dims[l], out = spec_.dims[l + 1];
    groups_.push_back({"layer" + std::to_string(l),
                       {{"layer" + std::to_string(l) + ".weight", out * in, true},
                        {"layer" + std::to_string(l) + ".bias", out, false}}});
  }
  const size_t last = spec_.dims.back();
  groups_.push_back({"scale", {{"scale.weight", last, false}}});
  groups_.push_back({"head", {{"head.weight", last, true}, {"head.bias", 1, false}}});
  for (auto& g : groups_) g.splittable = spec_.splittable;
}

void MlpModel::init(int g, int t, float* dst) const {
  std::mt19937_64 rng(spec_.seed * 1000003ull + uint64_t(g) * 101 + uint64_t(t));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = groups_[g].tensors[t].numel;
  const std::string& name = groups_[g].name;
  if (name == "scale") {
    for (size_t i = 0; i < n; ++i) dst[i] = 1.0f + 0.1f * normal(rng);
    return;
  }
  const int fan_in = name == "head" ? spec_.dims.back() : spec_.dims[g];
  const float std_ = t == 0 ? 1.0f / std::sqrt(float(fan_in)) : 0.1f;
  for (size_t i = 0; i < n; ++i) dst[i] = std_ * normal(rng);
}

DenseMlpParams MlpModel::dense_init() const {
  DenseMlpParams p;
  p.params.resize(groups_.size());
  p.grads.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
      p.params[g].emplace_back(groups_[g].tensors[t].numel);
      init(int(g), int(t), p.params[g].back().data());
    }
  return p;
}

double MlpModel::forward_backward(MlpParams& p, const float* x, const float* target, int n) const {
  const int L = hidden_layers();
  const int G = num_groups();
  std::vector<Mat> acts(L + 2);  // acts[0] = x, acts[l+1] = tanh layer l, acts[L+1] = scaled
  acts[0] = CMapM(x, n, spec_.dims[0]);
  for (int l = 0; l < L; ++l) {
    auto w = p.load(l);
    CMapM W(w[0].data(), spec_.dims[l + 1], spec_.dims[l]);  // [out, in]
    CMapV b(w[1].data(), spec_.dims[l + 1]);
    acts[l + 1] = ((acts[l] * W.transpose()).rowwise() + b).array().tanh().matrix();
    p.done(l);
  }
  {
    auto s = p.load(L);
    acts[L + 1] = acts[L] * CMapV(s[0].data(), spec_.dims.back()).asDiagonal();
    p.done(L);
  }
  Eigen::VectorXf y;
  {
    auto h = p.load(L + 1);
    y = (acts[L + 1] * CMapV(h[0].data(), spec_.dims.back()).transpose()).array() + h[1][0];
    p.done(L + 1);
  }
  Eigen::Map<const Eigen::VectorXf> tv(target, n);
  const Eigen::VectorXf dy = y - tv;  // d(sum 0.5 (y - t)^2)/dy
  const double loss = 0.5 * double(dy.squaredNorm());

  p.begin_backward();
  Mat da;
  {
    auto h = p.load(G - 1);
    std::vector<std::vector<float>> gr(2);
    Eigen::RowVectorXf dw = dy.transpose() * acts[L + 1];
    gr[0].assign(dw.data(), dw.data() + dw.size());
    gr[1] = {dy.sum()};
    da = dy * CMapV(h[0].data(), spec_.dims.back());
    p.store_grad(G - 1, gr);
    p.done(G - 1);
  }
  {
    auto s = p.load(L);
    Eigen::RowVectorXf ds = (da.array() * acts[L].array()).colwise().sum();
    da = da * CMapV(s[0].data(), spec_.dims.back()).asDiagonal();
    p.store_grad(L, {std::vector<float>(ds.data(), ds.data() + ds.size())});
    p.done(L);
  }
  for (int l = L - 1; l >= 0; --l) {
    auto w = p.load(l);
    CMapM W(w[0].data(), spec_.dims[l + 1], spec_.dims[l]);
    const Mat dz = (da.array() * (1.0f - acts[l + 1].array().square())).matrix();
    std::vector<std::vector<float>> gr(2);
    gr[0].resize(size_t(spec_.dims[l + 1]) * spec_.dims[l]);
    MapM(gr[0].data(), spec_.dims[l + 1], spec_.dims[l]) = dz.transpose() * acts[l];
    Eigen::RowVectorXf db = dz.colwise().sum();
    gr[1].assign(db.data(), db.data() + db.size());
    if (l > 0) da = dz * W;
    p.store_grad(l, gr);
    p.done(l);
  }
  return loss;
}

MlpDataset::MlpDataset(int n, int d, uint64_t seed) : dim(d), x(size_t(n) * d), t(n) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> u(d), v(d);
  for (auto& a : u) a = uni(rng);
  for (auto& a : v) a = uni(rng);
  for (int i = 0; i < n; ++i) {
    float xu = 0, xv = 0;
    for (int j = 0; j < d; ++j) {
      const float xi = uni(rng);
      x[size_t(i) * d + j] = xi;
      xu += xi * u[j];
      xv += xi * v[j];
    }
    t[i] = std::sin(xu) + 0.5f * std::cos(xv);
  }
}

}  // namespace zero::example
