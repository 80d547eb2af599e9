// Engine-free reading of a published sharded checkpoint (any saved world size and stage): the full fp32
// master value of each tensor, assembled from the rank files' slices by reading only the byte ranges it
// needs (one pread per (tensor, rank file) piece, reshard_plan.h), one tensor in memory at a time. No MPI.
// For export and offline tools; training resumes through load_checkpoint (load.h).
//
// Also resolves "RUN_DIR [--step N]" to a checkpoint directory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shard_layout.h"

namespace zero::checkpoint {

// The checkpoint directory of a run:
//   - `run_dir` itself when it holds manifest.json (a step_<N> directory given directly; `step` must then
//     be absent or equal its step); a link to one (checkpoints/best) gives the directory it points at;
//   - step: <run_dir>/checkpoints/step_<step> (InputError naming the run dir and listing the available
//     steps when it does not exist);
//   - no step: the one <run_dir>/checkpoints/latest names, else the highest complete step_<N>
//     (InputError naming the run dir when it has none).
std::string resolve_checkpoint_dir(const std::string& run_dir, std::optional<int64_t> step = std::nullopt);

struct FullTensorInfo {
  std::string name;
  size_t numel = 0;
  int group = 0;
  size_t offset = 0;  // first element inside its group
};

using FullTensorCallback = std::function<void(const std::string& name, std::span<const float> data)>;

class CheckpointTensors {
 public:
  // Reads <dir>/manifest.json and opens every rank file, checking its size against the manifest and the
  // group layout and (verify_checksums) its xxhash64, like load_checkpoint. InputError naming the file.
  // on_hashed (if given) follows the checksums' progress: bytes hashed so far, of all the files' bytes.
  using HashProgress = std::function<void(uint64_t hashed, uint64_t total)>;
  explicit CheckpointTensors(const std::string& dir, bool verify_checksums = true, const HashProgress& on_hashed = {});
  ~CheckpointTensors();
  CheckpointTensors(const CheckpointTensors&) = delete;
  CheckpointTensors& operator=(const CheckpointTensors&) = delete;

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  const std::vector<FullTensorInfo>& tensors() const { return tensors_; }  // manifest order
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const FullTensorInfo& tensor(const std::string& name) const;  // InputError naming the checkpoint

  // The full fp32 master of one tensor into `out` (numel elements).
  void read_master(const std::string& name, std::span<float> out) const;
  std::vector<float> read_master(const std::string& name) const;
  // Every tensor's full master in manifest order (group, then tensor), through one reused buffer.
  void for_each_master(const FullTensorCallback& cb) const;

  uint64_t bytes_read() const { return bytes_read_; }  // hashing and tensor reads so far

 private:
  std::string dir_;
  Manifest manifest_;
  FileLayout layout_;
  std::vector<std::unique_ptr<ReadFile>> files_;  // rank order
  std::vector<FullTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  mutable uint64_t bytes_read_ = 0;
};

// Opens `dir` and streams every tensor's full master to `cb` (CheckpointTensors::for_each_master).
void stream_full_masters(const std::string& dir, const FullTensorCallback& cb, bool verify_checksums = true);

}  // namespace zero::checkpoint
