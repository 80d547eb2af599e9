// The bridge between a model (model::ParamAccess, typed views) and the engine (zero::Engine, views in the
// compute dtype, in the backend's memory), shaped by the model's group specs. Views of host-addressable
// memory are handed over as they are (no copy, fp32 or bf16: the CPU model's ops widen and round); a
// backend the host cannot address goes through fp32 host scratch with the backend's copies on acquire,
// and gradients back on grad_ready. Split groups (the embedding, when larger than a bucket) go through
// the engine's pieces in the same way, one piece of a group at a time.
#pragma once
#include <vector>

#include "model/param_access.h"
#include "zero/engine.h"

namespace zero::pmtrain {

class EngineParamAccess final : public model::ParamAccess {
 public:
  // groups: the model's group specs, the ones the engine was built from (engine_groups).
  // model_reads_backend_memory: the model's ops run on the engine's backend (the CUDA model ops on CudaOps'
  // device), so views are handed over in place even where the host cannot address them.
  EngineParamAccess(Engine& engine, std::vector<model::GroupSpec> groups, bool model_reads_backend_memory = false);
  std::vector<model::TensorRef> acquire(int g) override;
  void release(int g) override;
  void begin_backward() override { engine_.begin_backward(); }
  std::vector<model::TensorRef> grad_buffers(int g) override;
  void grad_ready(int g) override;
  int num_pieces(int g) override { return engine_.num_pieces(g); }
  model::Piece acquire_piece(int g, int k) override;
  void release_piece(int g, int k) override;
  model::Piece grad_piece(int g, int k) override;
  void piece_ready(int g, int k) override;

 private:
  bool staged() const;
  // The engine's view as the model's typed views: in place, or (staged) fp32 copies in scratch[g].
  std::vector<model::TensorRef> shaped(const GroupView& view, int g, bool copy_in,
                                       std::vector<std::vector<std::vector<float>>>& scratch);
  // The engine's piece as the model's: in place, or (staged) fp32 copies of its runs in scratch[g].
  model::Piece as_piece(const PieceView& view, int g, bool copy_in,
                        std::vector<std::vector<std::vector<float>>>& scratch);

  Engine& engine_;
  std::vector<model::GroupSpec> groups_;
  bool in_place_ = false;  // model_reads_backend_memory
  // [group][tensor or run], staged only
  std::vector<std::vector<std::vector<float>>> param_scratch_, grad_scratch_;
  std::vector<GroupView> grad_views_;
  std::vector<PieceView> grad_pieces_;  // per group: the piece whose gradient is being written
};

// Engine group declarations from the model's group specs (names, sizes, weight-decay flags).
std::vector<GroupInfo> engine_groups(const std::vector<model::GroupSpec>& groups);

}  // namespace zero::pmtrain
