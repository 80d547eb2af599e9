#include "checkpoint/manifest.h"

#include <filesystem>
#include <limits>
#include <type_traits>

#include "checkpoint/file_io.h"
#include "core/check.h"

namespace zero::checkpoint {

using nlohmann::json;

namespace {
// An integer field in T's range. JSON floats are refused: nlohmann converts them with a cast, which is
// undefined for values such as 1e300 (found by fuzz/manifest_fuzz.cpp).
template <class T>
T int_field(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  bool fits = false;
  if (v.is_number_unsigned()) {
    fits = v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    fits = std::is_signed_v<T> ? x >= int64_t(std::numeric_limits<T>::min()) && x <= int64_t(std::numeric_limits<T>::max())
                               : x >= 0;
  }
  ZERO_REQUIRE(fits, InputError, "{}: '{}' must be an integer in [{}, {}], got {}", where, key,
               std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), v.dump());
  return v.is_number_unsigned() ? T(v.get<uint64_t>()) : T(v.get<int64_t>());
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
  return json{
      {"format", kFormatName},
      {"format_version", format_version},
      {"step", step},
      {"world_size", world},
      {"stage", stage},
      {"dtype", "f32"},
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
}

Manifest Manifest::from_json(const json& j, const std::string& where) {
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
    m.state.step = int_field<int64_t>(t, "step", where);
    m.optimizer_step = int_field<int64_t>(t, "optimizer_step", where);
    m.state.data_cursor = t.value("data_cursor", json(nullptr));
    m.state.rng = t.value("rng", json(nullptr));
    m.state.extra = t.value("extra", json(nullptr));
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: malformed manifest: {}", where, e.what()));
  }
  ZERO_REQUIRE(m.world >= 1 && int(m.files.size()) == m.world, InputError,
               "{}: world_size {} but {} shard files listed", where, m.world, m.files.size());
  for (int r = 0; r < m.world; ++r)
    ZERO_REQUIRE(m.files[r].rank == r && m.files[r].name == file_name_for_rank(r), InputError,
                 "{}: files[{}] is '{}' (rank {}), expected {}", where, r, m.files[r].name, m.files[r].rank,
                 file_name_for_rank(r));
  for (const auto& g : m.groups) {
    // Any shard that covers the group works (older checkpoints have unaligned shards); the reader reshards.
    size_t padded = 0;
    ZERO_REQUIRE(!__builtin_mul_overflow(g.shard, size_t(m.world), &padded) && padded >= g.numel && g.padded == padded,
                 InputError, "{}: group '{}' layout (numel {}, shard {}, padded {}) does not fit world size {}", where,
                 g.name, g.numel, g.shard, g.padded, m.world);
    for (const auto& t : g.tensors)
      ZERO_REQUIRE(t.offset <= g.numel && t.numel <= g.numel - t.offset, InputError,
                   "{}: tensor '{}' (offset {}, numel {}) lies outside its group '{}' of {} elements", where, t.name,
                   t.offset, t.numel, g.name, g.numel);
  }
  return m;
}

Manifest Manifest::read(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kManifestName).string();
  ZERO_REQUIRE(std::filesystem::is_directory(dir), InputError, "checkpoint directory {} does not exist", dir);
  ZERO_REQUIRE(std::filesystem::exists(path), InputError,
               "checkpoint file {} is missing (an incomplete checkpoint? use a step_<N> directory that `latest` names)",
               path);
  return parse(read_small_file(path), path);
}

Manifest Manifest::parse(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", where, e.what()));
  }
  return from_json(j, where);
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
