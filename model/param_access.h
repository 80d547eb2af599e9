// How the model reaches its parameters group by group (the engine contract, without the engine), and
// DenseParams: plain full fp32 host storage of every parameter and gradient for one process.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/memory.h"
#include "model/tensor_ref.h"

namespace zero::model {

struct TensorSpec {
  std::string name;            // HF state-dict name, e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // row-major, torch order ([out, in] for a linear weight)
  bool weight_decay = true;
  int64_t numel() const;
};

struct GroupSpec {
  std::string name;  // "embed", "layer.3", "head"
  std::vector<TensorSpec> tensors;
  bool splittable = false;  // the model can take it in pieces (the embedding): see ParamAccess::num_pieces
  int64_t numel() const;
};

// A contiguous run of a group's flat element space (its tensors concatenated in GroupSpec order):
// elements [begin, begin + count) live at data, in the piece's dtype.
struct FlatRun {
  int64_t begin = 0;
  int64_t count = 0;
  void* data = nullptr;
};
struct Piece {
  DType dtype = DType::F32;
  std::vector<FlatRun> runs;  // ascending, disjoint
};

// How the model reaches its parameters group by group (the engine contract, without the engine).
// Per micro-batch: forward calls acquire(g)/release(g) for g = 0..G-1 in order; then begin_backward();
// backward, for g = G-1..0: acquire(g) (again; under activation checkpointing the recompute uses it too),
// grad_buffers(g) -> the model OVERWRITES them with this micro-batch's gradient of the SUM of its pair losses,
// grad_ready(g), release(g).
// Views are typed (fp32 or bf16, in the memory of the model's ops backend), one per tensor of the group in
// GroupSpec order and shape; the model widens and rounds inside its ops, so no copy is made here.
class ParamAccess {
 public:
  virtual ~ParamAccess() = default;
  virtual std::vector<TensorRef> acquire(int g) = 0;  // the group's parameters, valid until release(g)
  virtual void release(int g) = 0;
  virtual void begin_backward() = 0;
  virtual std::vector<TensorRef> grad_buffers(int g) = 0;  // zero-or-garbage; the model overwrites them fully
  virtual void grad_ready(int g) = 0;

  // Pieces of a splittable group, so that nothing is sized by the whole of it (the embedding).
  // 1: the group is handed out whole (acquire / grad_buffers). More: only through pieces, and the model
  // must cover all of them: forward: for k: acquire_piece(g,k) ... release_piece(g,k); backward (no
  // acquire needed): for k: grad_piece(g,k) -> overwrite every run with the gradient of those elements,
  // piece_ready(g,k). The union of a group's pieces is the whole group; a piece's runs need not be adjacent.
  virtual int num_pieces(int g) { return 1; }
  // The defaults throw InternalError: an access that splits no group never gets these calls.
  virtual Piece acquire_piece(int g, int k);
  virtual void release_piece(int g, int k);
  virtual Piece grad_piece(int g, int k);
  virtual void piece_ready(int g, int k);
};

// How DenseParams cuts its splittable groups, the way the engine does over `world` ranks: a group's flat
// range is padded to `world` shards of ceil(numel / world) elements rounded up to shard_align; piece k
// is, on every rank r, the shard's elements [k*c, min((k+1)*c, shard)) (c = elems_per_rank), i.e. the
// runs [r*shard + k*c, r*shard + min((k+1)*c, shard)) clipped to numel. elems_per_rank 0: no pieces.
struct PieceLayout {
  int64_t elems_per_rank = 0;
  int world = 1;
  int64_t shard_align = 1;
};

// Plain full fp32 storage (single process, tests, `pmtrain score`): owns params and grads, one flat
// region per group. Parameters start at zero, gradients at zero. It checks the call protocol (acquire
// before release, grad_buffers only after begin_backward and while the group is acquired, pieces as
// num_pieces says) and throws InternalError on a violation, so a model that breaks the contract fails
// here before it fails in the engine. With a PieceLayout it hands its splittable groups out in pieces.
class DenseParams final : public ParamAccess {
 public:
  explicit DenseParams(std::vector<GroupSpec> groups, PieceLayout pieces = {});

  const std::vector<GroupSpec>& groups() const { return groups_; }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  int64_t numel() const;  // all parameters

  // By group g and tensor t (GroupSpec order).
  std::span<float> param(int g, int t);
  std::span<const float> param(int g, int t) const;
  std::span<float> grad(int g, int t);
  std::span<const float> grad(int g, int t) const;

  // By HF name; throws InputError naming the tensor when absent.
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const TensorSpec& spec(const std::string& name) const;
  std::pair<int, int> locate(const std::string& name) const;  // (group, tensor)
  std::span<float> param(const std::string& name);
  std::span<const float> param(const std::string& name) const;
  std::span<float> grad(const std::string& name);
  std::span<const float> grad(const std::string& name) const;

  // ParamAccess
  std::vector<TensorRef> acquire(int g) override;
  void release(int g) override;
  void begin_backward() override;
  std::vector<TensorRef> grad_buffers(int g) override;
  void grad_ready(int g) override;
  int num_pieces(int g) override;
  Piece acquire_piece(int g, int k) override;
  void release_piece(int g, int k) override;
  Piece grad_piece(int g, int k) override;
  void piece_ready(int g, int k) override;

 private:
  void check_group(int g) const;
  void check_whole(int g, const char* what) const;
  void check_piece(int g, int k, const char* what) const;
  std::vector<TensorRef> views(int g, HostVector<float>& flat) const;
  Piece piece(int g, int k, HostVector<float>& flat) const;
  void begin_forward_at(int g);

  std::vector<GroupSpec> groups_;
  PieceLayout layout_;
  std::vector<std::vector<int64_t>> offsets_;  // [group][tensor]: start in the group's flat region
  std::vector<HostVector<float>> params_;      // [group][flat element], on host_pages_allocate (core/memory.h)
  std::vector<HostVector<float>> grads_;       // [group][flat element]
  std::unordered_map<std::string, std::pair<int, int>> index_;
  std::vector<uint8_t> acquired_;                      // per group
  std::vector<std::vector<uint8_t>> piece_acquired_;   // [group][piece]
  std::vector<std::vector<uint8_t>> piece_pending_;    // [group][piece]: grad_piece given, not ready yet
  int64_t first_pieces_ready_ = 0;                     // group 0's pieces ready this backward
  bool in_backward_ = false;
};

}  // namespace zero::model
