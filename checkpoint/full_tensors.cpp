// Full fp32 masters from a sharded checkpoint, without an engine: pieces cut by reshard_plan.
#include "checkpoint/full_tensors.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/publish.h"
#include "checkpoint/reshard_plan.h"
#include "core/check.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

namespace {
std::string list_steps_text(const std::vector<int64_t>& steps) {
  std::string s;
  for (int64_t v : steps) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}
}  // namespace

std::string resolve_checkpoint_dir(const std::string& run_dir, std::optional<int64_t> step) {
  std::error_code ec;
  ZERO_REQUIRE(fs::is_directory(run_dir, ec), InputError, "run directory {} does not exist", run_dir);
  if (fs::exists(fs::path(run_dir) / kManifestName, ec)) {  // a checkpoint directory given directly
    if (fs::is_symlink(run_dir, ec)) {  // checkpoints/best: name the step_<N> it points at
      const fs::path target = fs::read_symlink(run_dir, ec);
      if (!ec) return resolve_checkpoint_dir((fs::path(run_dir).parent_path() / target).lexically_normal().string(), step);
    }
    if (step) {
      const Manifest m = Manifest::read(run_dir);
      ZERO_REQUIRE(m.step == *step, InputError, "{} is the checkpoint of step {}, not step {}", run_dir, m.step, *step);
    }
    return run_dir;
  }
  const RunPaths paths(run_dir);
  const std::vector<int64_t> steps = list_steps(paths);
  ZERO_REQUIRE(!steps.empty(), InputError,
               "run directory {} has no checkpoints (no complete {}/step_<N>/{}): was it trained with "
               "checkpoints enabled (run.save_every / run.save_final)?",
               run_dir, paths.root, kManifestName);
  if (step) {
    ZERO_REQUIRE(std::find(steps.begin(), steps.end(), *step) != steps.end(), InputError,
                 "run directory {} has no checkpoint for step {} (available steps: {})", run_dir, *step,
                 list_steps_text(steps));
    return paths.step_dir(*step);
  }
  if (!fs::exists(paths.latest_file(), ec)) return paths.step_dir(steps.back());  // `latest` lost: the highest
  std::string name = read_small_file(paths.latest_file());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  for (int64_t s : steps)
    if (name == fmt::format("step_{}", s)) return paths.step_dir(s);
  throw InputError(fmt::format("{} names '{}', which is not a complete checkpoint of run directory {}; pass --step N "
                               "(available steps: {})", paths.latest_file(), name, run_dir, list_steps_text(steps)));
}

CheckpointTensors::CheckpointTensors(const std::string& dir, bool verify, const HashProgress& on_hashed) : dir_(dir) {
  manifest_ = Manifest::read(dir);
  layout_ = FileLayout::of(manifest_.groups);
  for (int g = 0; g < int(manifest_.groups.size()); ++g) {
    const GroupEntry& ge = manifest_.groups[g];
    for (const TensorEntry& t : ge.tensors) {
      ZERO_REQUIRE(t.offset + t.numel <= ge.numel, InputError,
                   "{}/{}: tensor '{}' [{}, {}) lies outside its group '{}' of {} elements", dir, kManifestName, t.name,
                   t.offset, t.offset + t.numel, ge.name, ge.numel);
      ZERO_REQUIRE(index_.emplace(t.name, tensors_.size()).second, InputError, "{}/{}: tensor '{}' is listed twice",
                   dir, kManifestName, t.name);
      tensors_.push_back({t.name, t.numel, g, t.offset});
    }
  }
  uint64_t hashed = 0, to_hash = 0;
  for (const FileEntry& fe : manifest_.files) to_hash += fe.bytes;
  for (const FileEntry& fe : manifest_.files) {
    auto f = std::make_unique<ReadFile>((fs::path(dir) / fe.name).string());
    ZERO_REQUIRE(fe.bytes == layout_.bytes, InputError, "{}/{}: manifest lists {} bytes for {} but its groups need {}",
                 dir, kManifestName, fe.bytes, fe.name, layout_.bytes);
    ZERO_REQUIRE(f->size() >= fe.bytes, InputError,
                 "checkpoint file {} is truncated: {} bytes, the manifest says {} (re-save or use an older checkpoint)",
                 f->path(), f->size(), fe.bytes);
    ZERO_REQUIRE(f->size() == fe.bytes, InputError, "checkpoint file {} has {} bytes, the manifest says {} (corrupted?)",
                 f->path(), f->size(), fe.bytes);
    if (verify) {
      const uint64_t h = hash_file(*f, [&](uint64_t n) {
        hashed += n;
        if (on_hashed) on_hashed(hashed, to_hash);
      });
      bytes_read_ += f->size();
      ZERO_REQUIRE(h == fe.xxh64, InputError,
                   "checkpoint file {} is corrupted: xxhash64 {} but the manifest says {} (use an older checkpoint)",
                   f->path(), hex64(h), hex64(fe.xxh64));
    }
    files_.push_back(std::move(f));
  }
}

CheckpointTensors::~CheckpointTensors() = default;

const FullTensorInfo& CheckpointTensors::tensor(const std::string& name) const {
  const auto it = index_.find(name);
  ZERO_REQUIRE(it != index_.end(), InputError, "checkpoint {} has no tensor '{}'", dir_, name);
  return tensors_[it->second];
}

void CheckpointTensors::read_master(const std::string& name, std::span<float> out) const {
  const FullTensorInfo& t = tensor(name);
  ZERO_CHECK(out.size() == t.numel, "read_master('{}'): buffer of {} elements, the tensor has {}", name, out.size(),
             t.numel);
  // The tensor's range of its group, cut along the saved ranks' slices (empty ranges for other groups).
  std::vector<DestRange> dest(manifest_.groups.size());
  dest[t.group] = {t.offset, t.numel};
  size_t covered = 0;
  for (const ReadSpan& sp : plan_reads(manifest_.groups, manifest_.world, dest)) {
    files_[sp.file]->read_at(layout_.offset(sp.group, StateArray::Master, sp.src_elem), out.data() + sp.dst_elem,
                             sp.count * sizeof(float));
    bytes_read_ += sp.count * sizeof(float);
    covered += sp.count;
  }
  ZERO_CHECK(covered == t.numel, "read_master('{}'): the plan covered {} of {} elements", name, covered, t.numel);
}

std::vector<float> CheckpointTensors::read_master(const std::string& name) const {
  std::vector<float> v(tensor(name).numel);
  read_master(name, v);
  return v;
}

void CheckpointTensors::for_each_master(const FullTensorCallback& cb) const {
  std::vector<float> buf;
  for (const FullTensorInfo& t : tensors_) {
    buf.resize(t.numel);
    read_master(t.name, buf);
    cb(t.name, std::span<const float>(buf.data(), buf.size()));
  }
}

void stream_full_masters(const std::string& dir, const FullTensorCallback& cb, bool verify) {
  CheckpointTensors(dir, verify).for_each_master(cb);
}

}  // namespace zero::checkpoint
