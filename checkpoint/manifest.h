// manifest.json of a sharded checkpoint: what was saved (format version, step, world size, stage,
// the group/tensor table with each group's padded/shard layout, the resolved config, the trainer's
// state, and every shard file's size and xxhash64), its JSON form, and the check that a checkpoint
// fits a model. Pure data: no file layout arithmetic (shard_layout.h), no I/O beyond reading the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zero/partition.h"

namespace zero::checkpoint {

inline constexpr int kFormatVersion = 1;  // bump on any incompatible change; newer files are refused
inline constexpr const char* kFormatName = "zero-sharded-checkpoint";
inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kDtype = "f32";  // the only dtype of the shard files (fp32 little-endian)

// What the trainer hands to save() and gets back from load(); the library never interprets the JSON.
struct TrainState {
  int64_t step = 0;                      // trainer steps completed; names the checkpoint step_<step>
  nlohmann::json data_cursor = nullptr;  // e.g. data::SamplerCursor::to_json()
  nlohmann::json rng = nullptr;          // RNG state(s)
  nlohmann::json extra = nullptr;        // anything else (metrics so far, ...)
};

struct TensorEntry {
  std::string name;
  size_t numel = 0;
  size_t offset = 0;  // start inside its group
};

struct GroupEntry {
  std::string name;
  size_t numel = 0;   // real elements
  size_t shard = 0;   // elements per rank file: shard_elements(numel, world); ceil(numel / world) in older checkpoints
  size_t padded = 0;  // shard * world
  std::vector<TensorEntry> tensors;
};

struct FileEntry {
  std::string name;  // rank_<r>.bin
  int rank = 0;
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
};

struct Manifest {
  int format_version = kFormatVersion;
  int64_t step = 0;
  int world = 1;         // rank files: the ranks the state was sharded over
  int shard_groups = 1;  // hybrid sharding: the groups of `world` ranks that each held it (optional key; 1: none)
  int stage = 0;
  int64_t optimizer_step = 0;
  std::string config;  // the resolved config, verbatim
  std::vector<GroupEntry> groups;
  std::vector<FileEntry> files;  // one per rank, in rank order
  TrainState state;

  nlohmann::json to_json() const;
  // InputError naming `where` on a malformed or unsound manifest (validate()); a newer format version is
  // refused first. `dir_step`: the N of the step_<N> directory it was read from, if any.
  static Manifest from_json(const nlohmann::json& j, const std::string& where,
                            std::optional<int64_t> dir_step = std::nullopt);
  // Parses manifest text (InputError naming `where` on invalid JSON or a malformed manifest).
  static Manifest parse(const std::string& text, const std::string& where,
                        std::optional<int64_t> dir_step = std::nullopt);
  // Reads and parses <dir>/manifest.json (InputError naming the file); a directory named step_<N> (also
  // through a symlink such as checkpoints/best) must hold the manifest of step N.
  static Manifest read(const std::string& dir);
  // Every cross-field rule, InputError naming `where` and the field: step and trainer.step >= 0, equal, and
  // N of a step_<N> directory; trainer.optimizer_step >= 0; stage 0-3; world_size >= 1 and one file per rank
  // (rank_<r>.bin in order); dtype "f32" (checked while parsing); trainer.rng an object, array or null; at
  // least one group; each group's numel >= 1, shard ceil(numel / world_size) (or that rounded up to
  // kShardAlign: shard_elements), padded = shard x world_size, tensors back to back covering numel; every
  // file's bytes FileLayout::bytes of the groups (shard_layout.h). from_json calls it.
  void validate(const std::string& where, std::optional<int64_t> dir_step = std::nullopt) const;
};

// The group table of a model at a world size, as the manifest records it.
std::vector<GroupEntry> describe_groups(const std::vector<GroupInfo>& groups, const Partition& part);

// InputError naming the first group or tensor whose name or element count differs, with both shapes.
void check_model_matches(const Manifest& m, const std::vector<GroupInfo>& model, const std::string& dir);

std::string file_name_for_rank(int rank);  // "rank_<r>.bin"

}  // namespace zero::checkpoint
