// DenseParams: full fp32 parameter and gradient storage with protocol checks.
#include "model/param_access.h"

#include <algorithm>

#include "core/check.h"

namespace zero::model {

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t GroupSpec::numel() const {
  int64_t n = 0;
  for (const TensorSpec& t : tensors) n += t.numel();
  return n;
}

Piece ParamAccess::acquire_piece(int g, int k) {
  throw InternalError(fmt::format("acquire_piece({}, {}): this ParamAccess hands out whole groups only", g, k));
}
void ParamAccess::release_piece(int g, int k) {
  throw InternalError(fmt::format("release_piece({}, {}): this ParamAccess hands out whole groups only", g, k));
}
Piece ParamAccess::grad_piece(int g, int k) {
  throw InternalError(fmt::format("grad_piece({}, {}): this ParamAccess hands out whole groups only", g, k));
}
void ParamAccess::piece_ready(int g, int k) {
  throw InternalError(fmt::format("piece_ready({}, {}): this ParamAccess hands out whole groups only", g, k));
}

DenseParams::DenseParams(std::vector<GroupSpec> groups, PieceLayout pieces) : groups_(std::move(groups)), layout_(pieces) {
  ZERO_CHECK(layout_.elems_per_rank >= 0 && layout_.world >= 1 && layout_.shard_align >= 1, "bad piece layout");
  const size_t G = groups_.size();
  offsets_.resize(G);
  params_.resize(G);
  grads_.resize(G);
  acquired_.assign(G, 0);
  piece_acquired_.resize(G);
  piece_pending_.resize(G);
  for (size_t g = 0; g < G; ++g) {
    int64_t n = 0;
    for (size_t t = 0; t < groups_[g].tensors.size(); ++t) {
      const TensorSpec& s = groups_[g].tensors[t];
      ZERO_CHECK(s.numel() >= 0, "tensor {} has a negative dimension", s.name);
      offsets_[g].push_back(n);
      n += s.numel();
      const bool fresh = index_.emplace(s.name, std::make_pair(int(g), int(t))).second;
      ZERO_CHECK(fresh, "tensor name {} appears twice in the group specs", s.name);
    }
    params_[g].assign(size_t(n), 0.0f);
    grads_[g].assign(size_t(n), 0.0f);
    piece_acquired_[g].assign(size_t(num_pieces(int(g))), 0);
    piece_pending_[g].assign(size_t(num_pieces(int(g))), 0);
  }
}

int64_t DenseParams::numel() const {
  int64_t n = 0;
  for (const GroupSpec& g : groups_) n += g.numel();
  return n;
}

void DenseParams::check_group(int g) const {
  ZERO_CHECK(g >= 0 && g < num_groups(), "group {} out of range [0, {})", g, num_groups());
}

std::span<float> DenseParams::param(int g, int t) {
  check_group(g);
  return std::span<float>(params_[g]).subspan(size_t(offsets_[g].at(t)), size_t(groups_[g].tensors[t].numel()));
}
std::span<const float> DenseParams::param(int g, int t) const {
  check_group(g);
  return std::span<const float>(params_[g]).subspan(size_t(offsets_[g].at(t)), size_t(groups_[g].tensors[t].numel()));
}
std::span<float> DenseParams::grad(int g, int t) {
  check_group(g);
  return std::span<float>(grads_[g]).subspan(size_t(offsets_[g].at(t)), size_t(groups_[g].tensors[t].numel()));
}
std::span<const float> DenseParams::grad(int g, int t) const {
  check_group(g);
  return std::span<const float>(grads_[g]).subspan(size_t(offsets_[g].at(t)), size_t(groups_[g].tensors[t].numel()));
}

std::pair<int, int> DenseParams::locate(const std::string& name) const {
  auto it = index_.find(name);
  ZERO_REQUIRE(it != index_.end(), InputError, "no parameter named '{}' in this model", name);
  return it->second;
}
const TensorSpec& DenseParams::spec(const std::string& name) const {
  auto [g, t] = locate(name);
  return groups_[g].tensors[t];
}
std::span<float> DenseParams::param(const std::string& name) {
  auto [g, t] = locate(name);
  return param(g, t);
}
std::span<const float> DenseParams::param(const std::string& name) const {
  auto [g, t] = locate(name);
  return param(g, t);
}
std::span<float> DenseParams::grad(const std::string& name) {
  auto [g, t] = locate(name);
  return grad(g, t);
}
std::span<const float> DenseParams::grad(const std::string& name) const {
  auto [g, t] = locate(name);
  return grad(g, t);
}

std::vector<TensorRef> DenseParams::views(int g, HostVector<float>& flat) const {
  std::vector<TensorRef> out;
  for (size_t t = 0; t < groups_[g].tensors.size(); ++t)
    out.emplace_back(flat.data() + offsets_[g][t], DType::F32, groups_[g].tensors[t].shape);
  return out;
}

void DenseParams::check_whole(int g, const char* what) const {
  check_group(g);
  ZERO_CHECK(piece_acquired_[g].size() == 1, "{}({}): the group is handed out in {} pieces", what, g,
             piece_acquired_[g].size());
}

// A forward pass starting at group 0 begins a new micro-batch: nothing may be held then.
void DenseParams::begin_forward_at(int g) {
  if (g != 0 || in_backward_) return;
  for (uint8_t a : acquired_) ZERO_CHECK(!a, "group 0 acquired while another group is held");
}

std::vector<TensorRef> DenseParams::acquire(int g) {
  check_whole(g, "acquire");
  ZERO_CHECK(!acquired_[g], "group {} acquired twice without release", g);
  begin_forward_at(g);
  acquired_[g] = 1;
  return views(g, params_[g]);
}

void DenseParams::release(int g) {
  check_whole(g, "release");
  ZERO_CHECK(acquired_[g], "group {} released without acquire", g);
  acquired_[g] = 0;
  // The backward pass ends when group 0 is released after its gradient.
  if (g == 0 && in_backward_) in_backward_ = false;
}

void DenseParams::begin_backward() {
  in_backward_ = true;
  first_pieces_ready_ = 0;
}

std::vector<TensorRef> DenseParams::grad_buffers(int g) {
  check_whole(g, "grad_buffers");
  ZERO_CHECK(in_backward_, "grad_buffers({}) outside backward (begin_backward not called)", g);
  ZERO_CHECK(acquired_[g], "grad_buffers({}) while the group is not acquired", g);
  return views(g, grads_[g]);
}

void DenseParams::grad_ready(int g) {
  check_whole(g, "grad_ready");
  ZERO_CHECK(in_backward_, "grad_ready({}) outside backward", g);
}

int DenseParams::num_pieces(int g) {
  check_group(g);
  const int64_t c = layout_.elems_per_rank, W = layout_.world, align = layout_.shard_align;
  if (!groups_[g].splittable || c == 0) return 1;
  const int64_t shard = ((groups_[g].numel() + W - 1) / W + align - 1) / align * align;
  return int(std::max<int64_t>(1, (shard + c - 1) / c));
}

void DenseParams::check_piece(int g, int k, const char* what) const {
  check_group(g);
  const size_t K = piece_acquired_[g].size();
  ZERO_CHECK(K > 1, "{}({}, {}): the group is handed out whole", what, g, k);
  ZERO_CHECK(k >= 0 && size_t(k) < K, "{}({}, {}): piece out of range [0, {})", what, g, k, K);
}

Piece DenseParams::piece(int g, int k, HostVector<float>& flat) const {
  const int64_t c = layout_.elems_per_rank, W = layout_.world, align = layout_.shard_align;
  const int64_t numel = int64_t(flat.size());
  const int64_t shard = ((numel + W - 1) / W + align - 1) / align * align;
  Piece p;
  for (int64_t r = 0; r < W; ++r) {
    const int64_t begin = r * shard + k * c, end = std::min(r * shard + std::min((k + 1) * c, shard), numel);
    if (begin < end) p.runs.push_back({begin, end - begin, flat.data() + begin});
  }
  return p;
}

Piece DenseParams::acquire_piece(int g, int k) {
  check_piece(g, k, "acquire_piece");
  ZERO_CHECK(!in_backward_, "acquire_piece({}, {}) in backward: pieces are read in forward only", g, k);
  ZERO_CHECK(!piece_acquired_[g][k], "piece ({}, {}) acquired twice without release", g, k);
  if (k == 0) begin_forward_at(g);
  piece_acquired_[g][k] = 1;
  return piece(g, k, params_[g]);
}

void DenseParams::release_piece(int g, int k) {
  check_piece(g, k, "release_piece");
  ZERO_CHECK(piece_acquired_[g][k], "piece ({}, {}) released without acquire", g, k);
  piece_acquired_[g][k] = 0;
}

Piece DenseParams::grad_piece(int g, int k) {
  check_piece(g, k, "grad_piece");
  ZERO_CHECK(in_backward_, "grad_piece({}, {}) outside backward (begin_backward not called)", g, k);
  ZERO_CHECK(!piece_pending_[g][k], "grad_piece({}, {}) twice without piece_ready", g, k);
  piece_pending_[g][k] = 1;
  return piece(g, k, grads_[g]);
}

void DenseParams::piece_ready(int g, int k) {
  check_piece(g, k, "piece_ready");
  ZERO_CHECK(piece_pending_[g][k], "piece_ready({}, {}) without grad_piece", g, k);
  piece_pending_[g][k] = 0;
  // The backward pass ends when group 0's last piece is ready.
  if (g == 0 && ++first_pieces_ready_ == int64_t(piece_pending_[0].size())) in_backward_ = false;
}

}  // namespace zero::model
