#include "checkpoint/manifest.h"

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <type_traits>

#include "checkpoint/file_io.h"
#include "checkpoint/publish.h"
#include "checkpoint/shard_layout.h"
#include "core/check.h"

namespace zero::checkpoint {

using nlohmann::json;

namespace {
// An integer field in T's range. JSON floats are refused: nlohmann converts them with a cast, which is
// undefined for values such as 1e300 (found by fuzz/manifest_fuzz.cpp).
template <class T>
T int_field(const json& obj, const char* key, const std::string& where, const char* label = nullptr) {
  const json& v = obj.at(key);
  bool fits = false;
  if (v.is_number_unsigned()) {
    fits = v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    fits = std::is_signed_v<T> ? x >= int64_t(std::numeric_limits<T>::min()) && x <= int64_t(std::numeric_limits<T>::max())
                               : x >= 0;
  }
  ZERO_REQUIRE(fits, InputError, "{}: '{}' must be an integer in [{}, {}], got {}", where, label ? label : key,
               std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), v.dump());
  return v.is_number_unsigned() ? T(v.get<uint64_t>()) : T(v.get<int64_t>());
}

// A JSON value for a message, cut short.
std::string short_dump(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// The N of a checkpoint directory named step_<N> (through symlinks such as checkpoints/best); nullopt for
// any other name (a copied or renamed checkpoint is checked against its manifest alone).
std::optional<int64_t> step_of_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::path(dir), ec);
  if (ec) p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string name = p.filename().string();
  const std::string prefix = "step_";
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 18 ||
      name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
    return std::nullopt;
  return std::stoll(name.substr(prefix.size()));
}
}  // namespace

std::string file_name_for_rank(int rank) { return fmt::format("rank_{}.bin", rank); }

json Manifest::to_json() const {
  json groups_j = json::array();
  for (const auto& g : groups) {
    json tensors_j = json::array();
    for (const auto& t : g.tensors) tensors_j.push_back({{"name", t.name}, {"numel", t.numel}, {"offset", t.offset}});
    groups_j.push_back(
        {{"name", g.name}, {"numel", g.numel}, {"shard", g.shard}, {"padded", g.padded}, {"tensors", tensors_j}});
  }
  json files_j = json::array();
  for (const auto& f : files)
    files_j.push_back({{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}, {"xxh64", hex64(f.xxh64)}});
  json j{
      {"format", kFormatName},
      {"format_version", format_version},
      {"step", step},
      {"world_size", world},
      {"stage", stage},
      {"dtype", kDtype},
      {"file_layout", "per group in order: master[shard], m[shard], v[shard]; fp32 little-endian; rank r "
                      "holds elements [r*shard, (r+1)*shard) of the group's padded range"},
      {"groups", groups_j},
      {"files", files_j},
      {"config", config},
      {"trainer",
       {{"step", state.step},
        {"optimizer_step", optimizer_step},
        {"data_cursor", state.data_cursor},
        {"rng", state.rng},
        {"extra", state.extra}}},
  };
  if (shard_groups > 1) j["shard_groups"] = shard_groups;  // written only where it says something
  return j;
}

Manifest Manifest::from_json(const json& j, const std::string& where, std::optional<int64_t> dir_step) {
  Manifest m;
  ZERO_REQUIRE(j.is_object() && j.contains("format_version") && j["format_version"].is_number_integer(), InputError,
               "{}: not a zero checkpoint manifest (no integer 'format_version')", where);
  m.format_version = int_field<int>(j, "format_version", where);
  ZERO_REQUIRE(m.format_version <= kFormatVersion, InputError,
               "{}: checkpoint format version {} is newer than this build supports (version {}); load it with a "
               "newer zero", where, m.format_version, kFormatVersion);
  ZERO_REQUIRE(m.format_version >= 1, InputError, "{}: invalid checkpoint format version {}", where, m.format_version);
  try {
    ZERO_REQUIRE(j.at("format").get<std::string>() == kFormatName, InputError, "{}: format is '{}', expected '{}'",
                 where, j.at("format").get<std::string>(), kFormatName);
    m.step = int_field<int64_t>(j, "step", where);
    m.world = int_field<int>(j, "world_size", where);
    m.stage = int_field<int>(j, "stage", where);
    if (j.contains("shard_groups")) m.shard_groups = int_field<int>(j, "shard_groups", where);
    const json& dtype = j.at("dtype");
    ZERO_REQUIRE(dtype.is_string() && dtype.get<std::string>() == kDtype, InputError,
                 "{}: dtype is {}; this format stores only \"{}\" (fp32) shard files", where, short_dump(dtype), kDtype);
    m.config = j.at("config").get<std::string>();
    for (const auto& gj : j.at("groups")) {
      GroupEntry g;
      g.name = gj.at("name").get<std::string>();
      g.numel = int_field<size_t>(gj, "numel", where);
      g.shard = int_field<size_t>(gj, "shard", where);
      g.padded = int_field<size_t>(gj, "padded", where);
      for (const auto& tj : gj.at("tensors"))
        g.tensors.push_back({tj.at("name").get<std::string>(), int_field<size_t>(tj, "numel", where),
                              int_field<size_t>(tj, "offset", where)});
      m.groups.push_back(std::move(g));
    }
    for (const auto& fj : j.at("files"))
      m.files.push_back({fj.at("name").get<std::string>(), int_field<int>(fj, "rank", where), int_field<uint64_t>(fj, "bytes", where),
                         parse_hex64(fj.at("xxh64").get<std::string>(), where + ": xxh64 of " + fj.at("name").get<std::string>())});
    const json& t = j.at("trainer");
    m.state.step = int_field<int64_t>(t, "step", where, "trainer.step");
    m.optimizer_step = int_field<int64_t>(t, "optimizer_step", where, "trainer.optimizer_step");
    m.state.data_cursor = t.value("data_cursor", json(nullptr));
    m.state.rng = t.value("rng", json(nullptr));
    m.state.extra = t.value("extra", json(nullptr));
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: malformed manifest: {}", where, e.what()));
  }
  m.validate(where, dir_step);
  return m;
}

// Every cross-field rule of the format (docs/CHECKPOINTS.md) in one place: a manifest that breaks one is
// unsound, so load refuses it and resume 'auto' (checkpoint_problem) skips it to an older checkpoint.
void Manifest::validate(const std::string& where, std::optional<int64_t> dir_step) const {
  ZERO_REQUIRE(step >= 0, InputError, "{}: step is {}; it must be >= 0", where, step);
  ZERO_REQUIRE(state.step >= 0, InputError, "{}: trainer.step is {}; it must be >= 0", where, state.step);
  if (dir_step) {
    ZERO_REQUIRE(state.step == *dir_step, InputError, "{}: trainer.step {} but the directory is step_{}", where,
                 state.step, *dir_step);
    ZERO_REQUIRE(step == *dir_step, InputError, "{}: step {} but the directory is step_{}", where, step, *dir_step);
  }
  ZERO_REQUIRE(step == state.step, InputError, "{}: step {} but trainer.step {}; they must be equal", where, step,
               state.step);
  ZERO_REQUIRE(optimizer_step >= 0, InputError, "{}: trainer.optimizer_step is {}; it must be >= 0", where,
               optimizer_step);
  ZERO_REQUIRE(stage >= 0 && stage <= 3, InputError, "{}: stage {} is not 0-3", where, stage);
  ZERO_REQUIRE(world >= 1, InputError, "{}: world_size is {}; it must be >= 1", where, world);
  ZERO_REQUIRE(shard_groups >= 1, InputError, "{}: shard_groups is {}; it must be >= 1", where, shard_groups);
  ZERO_REQUIRE(state.rng.is_null() || state.rng.is_object() || state.rng.is_array(), InputError,
               "{}: trainer.rng is {}; it must be an object, an array or null", where, short_dump(state.rng));
  ZERO_REQUIRE(files.size() == size_t(world), InputError, "{}: world_size {} but {} shard files listed", where, world,
               files.size());
  for (int r = 0; r < world; ++r)
    ZERO_REQUIRE(files[r].rank == r && files[r].name == file_name_for_rank(r), InputError,
                 "{}: files[{}] is '{}' (rank {}), expected {}", where, r, files[r].name, files[r].rank,
                 file_name_for_rank(r));
  ZERO_REQUIRE(!groups.empty(), InputError, "{}: groups is empty; a checkpoint holds at least one parameter group",
               where);
  const size_t W = size_t(world);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const GroupEntry& g = groups[gi];
    ZERO_REQUIRE(g.numel >= 1, InputError, "{}: groups[{}] '{}': numel is 0; a parameter group is never empty", where,
                 gi, g.name);
    // shard = the engine's shard rule (shard_elements, zero/partition.h) since 64-element shards; older
    // checkpoints have the unaligned ceil(numel / world_size). The reader reshards either.
    const size_t lo = g.numel / W + (g.numel % W != 0);
    const size_t hi = shard_elements(g.numel, world);
    ZERO_REQUIRE(g.shard >= lo && g.shard <= hi, InputError,
                 "{}: groups[{}] '{}': shard {} does not fit numel {} at world_size {} (it must be ceil(numel / "
                 "world_size) = {}, or that rounded up to a multiple of {}: {})", where, gi, g.name, g.shard, g.numel,
                 world, lo, kShardAlign, hi);
    size_t padded = 0;
    ZERO_REQUIRE(!__builtin_mul_overflow(g.shard, W, &padded) && g.padded == padded, InputError,
                 "{}: groups[{}] '{}': padded {} but it must be shard {} x world_size {}", where, gi, g.name, g.padded,
                 g.shard, world);
    size_t at = 0;
    for (const auto& t : g.tensors) {
      ZERO_REQUIRE(t.offset <= g.numel && t.numel <= g.numel - t.offset, InputError,
                   "{}: tensor '{}' (offset {}, numel {}) lies outside its group '{}' of {} elements", where, t.name,
                   t.offset, t.numel, g.name, g.numel);
      ZERO_REQUIRE(t.offset == at, InputError,
                   "{}: groups[{}] '{}': tensor '{}' has offset {}, expected {} (a group's tensors lie back to back)",
                   where, gi, g.name, t.name, t.offset, at);
      at += t.numel;
    }
    ZERO_REQUIRE(at == g.numel, InputError,
                 "{}: groups[{}] '{}': numel is {} but its tensors hold {} elements", where, gi, g.name, g.numel, at);
  }
  // rank_<r>.bin: master, m, v (fp32) of `shard` elements for each group, as the reader lays it out.
  const std::optional<FileLayout> layout = FileLayout::checked(groups);
  for (const FileEntry& f : files)
    ZERO_REQUIRE(layout && f.bytes == layout->bytes, InputError,
                 "{}: files[{}] ({}) bytes is {}; the groups need {} (3 fp32 arrays of each group's shard)", where,
                 f.rank, f.name, f.bytes, layout ? fmt::format("{}", layout->bytes) : std::string("more than 2^64"));
}

Manifest Manifest::read(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kManifestName).string();
  ZERO_REQUIRE(std::filesystem::exists(dir), InputError, "checkpoint directory {} does not exist", dir);
  if (!std::filesystem::exists(path)) {  // a path beside a checkpoint (a run, its manifest file) says which to give
    const std::string hint = not_a_checkpoint_hint(dir);
    ZERO_REQUIRE(hint.empty(), InputError, "{} is not a checkpoint directory: {}", dir, hint);
    ZERO_REQUIRE(std::filesystem::is_directory(dir), InputError, "{} is not a checkpoint directory", dir);
    throw InputError(fmt::format("checkpoint file {} is missing (an incomplete checkpoint? use a step_<N> directory "
                                 "that `latest` names)", path));
  }
  return parse(read_small_file(path), path, step_of_directory(dir));
}

Manifest Manifest::parse(const std::string& text, const std::string& where, std::optional<int64_t> dir_step) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", where, e.what()));
  }
  return from_json(j, where, dir_step);
}

std::vector<GroupEntry> describe_groups(const std::vector<GroupInfo>& groups, const Partition& part) {
  std::vector<GroupEntry> out;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& L = part.groups[g];
    GroupEntry e{groups[g].name, L.numel, L.shard, L.padded, {}};
    for (size_t t = 0; t < groups[g].tensors.size(); ++t)
      e.tensors.push_back({groups[g].tensors[t].name, groups[g].tensors[t].numel, L.tensor_offsets[t]});
    out.push_back(std::move(e));
  }
  return out;
}

void check_model_matches(const Manifest& m, const std::vector<GroupInfo>& model, const std::string& dir) {
  auto list = [](const auto& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x.name;
    return s;
  };
  for (size_t g = 0; g < std::max(m.groups.size(), model.size()); ++g) {
    ZERO_REQUIRE(g < m.groups.size() && g < model.size(), InputError,
                 "checkpoint {} does not fit the model: it has {} parameter groups [{}], the model has {} [{}]", dir,
                 m.groups.size(), list(m.groups), model.size(), list(model));
    const GroupEntry& c = m.groups[g];
    const GroupInfo& k = model[g];
    ZERO_REQUIRE(c.name == k.name, InputError,
                 "checkpoint {} does not fit the model: parameter group {} is '{}' in the checkpoint but '{}' in the model",
                 dir, g, c.name, k.name);
    ZERO_REQUIRE(c.tensors.size() == k.tensors.size(), InputError,
                 "checkpoint {} does not fit the model: group '{}' has tensors [{}] in the checkpoint but [{}] in the model",
                 dir, c.name, list(c.tensors), list(k.tensors));
    for (size_t t = 0; t < c.tensors.size(); ++t) {
      ZERO_REQUIRE(c.tensors[t].name == k.tensors[t].name, InputError,
                   "checkpoint {} does not fit the model: tensor {} of group '{}' is '{}' in the checkpoint but '{}' in "
                   "the model", dir, t, c.name, c.tensors[t].name, k.tensors[t].name);
      ZERO_REQUIRE(c.tensors[t].numel == k.tensors[t].numel, InputError,
                   "checkpoint {} does not fit the model: tensor '{}' (group '{}') has shape [{}] in the checkpoint but "
                   "[{}] in the model", dir, c.tensors[t].name, c.name, c.tensors[t].numel, k.tensors[t].numel);
    }
  }
}

}  // namespace zero::checkpoint
