#include "pmtrain/tensorboard.h"

#include <unistd.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <variant>

#include <fmt/format.h>

#include "core/check.h"
#include "core/host_name.h"
#include "pmtrain/paths.h"

namespace zero::pmtrain {

// The framing and the protobuf fields below are written as bytes in little-endian order, the host's.
static_assert(std::endian::native == std::endian::little, "the event file writer assumes a little-endian host");

namespace {

// Debian packages no C++ CRC-32C, so it is this table (the reflected Castagnoli polynomial, byte at a time).
constexpr std::array<uint32_t, 256> kCrc32cTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}();

uint32_t masked_crc(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// Protobuf's wire format, the few shapes an Event needs: a key is (field << 3 | wire type); 0 = varint,
// 1 = 8 bytes, 2 = length-delimited, 5 = 4 bytes.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void put_key(std::string& out, int field, int wire_type) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire_type)); }
template <class T>
void put_fixed(std::string& out, int field, T v) {  // double (wire type 1) or float (5)
  put_key(out, field, sizeof(T) == 8 ? 1 : 5);
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event fields (tensorflow/core/util/event.proto) and Summary's (tensorflow/core/framework/summary.proto).
enum : int { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5 };
enum : int { kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2, kValueTensor = 8, kValueMetadata = 9 };
// SummaryMetadata's and PluginData's (summary.proto), TensorProto's (tensor.proto), DataType's DT_STRING (types.proto).
enum : int { kMetadataPluginData = 1, kPluginName = 1, kPluginContent = 2 };
enum : int { kTensorDtype = 1, kTensorShape = 2, kTensorStringVal = 8, kDtString = 7 };
// The hparams plugin's (tensorboard/plugins/hparams/plugin_data.proto) and google.protobuf.Value's (struct.proto).
enum : int { kHParamsSessionStartInfo = 3, kSessionHParams = 1, kSessionStartTime = 5 };
enum : int { kHParamsSessionEndInfo = 4, kSessionStatus = 1, kSessionEndTime = 2, kStatusSuccess = 1, kStatusFailure = 2 };
enum : int { kMapKey = 1, kMapValue = 2, kValueNumber = 2, kValueString = 3, kValueBool = 4 };

std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_fixed(e, kWallTime, wall_time);
  if (step != 0) {  // proto3 leaves a field at its default out (step 0: the file version, an eval at the start)
    put_key(e, kStep, 0);
    put_varint(e, uint64_t(step));  // int64: a negative as its two's complement, as protobuf encodes it
  }
  return e;
}

void add_scalars(std::vector<std::pair<std::string, double>>& out, const std::string& prefix, const nlohmann::json& j) {
  for (const auto& [key, value] : j.items()) {
    const std::string tag = prefix + "/" + key;
    if (value.is_object()) add_scalars(out, tag, value);
    // A NaN or infinity is null in metrics.jsonl (JSON has no such number): no scalar, so the file rebuilt from
    // metrics.jsonl at a resume holds what the live one did.
    else if (value.is_number() && std::isfinite(value.get<double>())) out.emplace_back(tag, value.get<double>());
  }
}

// An event holding one plugin's summary: `tag`, SummaryMetadata naming `plugin` with its `content` (left out when
// empty), and the serialized TensorProto `tensor` as the value (none when empty, as torch writes hparams).
std::string plugin_event(const std::string& tag, const char* plugin, const std::string& content,
                         const std::string& tensor, double wall_time, int64_t step) {
  std::string plugin_data, metadata, value, summary;
  put_bytes(plugin_data, kPluginName, plugin);
  if (!content.empty()) put_bytes(plugin_data, kPluginContent, content);
  put_bytes(metadata, kMetadataPluginData, plugin_data);
  put_bytes(value, kValueTag, tag);
  if (!tensor.empty()) put_bytes(value, kValueTensor, tensor);
  put_bytes(value, kValueMetadata, metadata);
  put_bytes(summary, kSummaryValue, value);
  std::string event = event_head(wall_time, step);
  put_bytes(event, kSummary, summary);
  return event;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = kCrc32cTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::vector<std::pair<std::string, double>> record_scalars(const nlohmann::json& record) {
  std::vector<std::pair<std::string, double>> out;
  if (!record.is_object() || !record.contains("type") || !record["type"].is_string() || !record.contains("step") ||
      !record["step"].is_number_integer())
    return out;
  const std::string type = record["type"].get<std::string>();
  if (type != "train" && type != "eval" && type != "epoch") return out;  // the curves; not a resume's details
  nlohmann::json numbers = record;
  for (const char* own : {"type", "step", "time"}) numbers.erase(own);
  add_scalars(out, type, numbers);
  return out;
}

EventFile::EventFile(const std::string& dir, double wall_time) : start_time_(wall_time) {
  namespace fs = std::filesystem;
  make_dir(dir, "run.tensorboard");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().filename().string().starts_with("events.out.tfevents.")) {
      fs::remove(entry.path(), ec);
      ZERO_REQUIRE(!ec, InputError, "run.tensorboard: cannot remove the earlier event file {}: {}", entry.path().string(),
                   ec.message());
    }
  ZERO_REQUIRE(!ec, InputError, "run.tensorboard: cannot list {}: {}", dir, ec.message());
  // TensorFlow's naming: events.out.tfevents.<unix seconds>.<host>[.<pid>.<n>]; tensorboard finds "tfevents".
  path_ = (fs::path(dir) / fmt::format("events.out.tfevents.{:010d}.{}.{}.0", int64_t(wall_time), host_name(), getpid())).string();
  file_ = fopen(path_.c_str(), "wb");
  ZERO_REQUIRE(file_, InputError, "run.tensorboard: cannot open {} for writing: {}", path_, std::strerror(errno));
  std::string first = event_head(wall_time, 0);
  put_bytes(first, kFileVersion, "brain.Event:2");
  ZERO_REQUIRE(append(first), InputError, "run.tensorboard: cannot write {}: {}", path_, std::strerror(errno));
}

EventFile::~EventFile() {
  if (file_) fclose(file_);
}

bool EventFile::write(const nlohmann::json& record) {
  const auto scalars = record_scalars(record);
  if (scalars.empty()) return true;
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, kValueTag, tag);
    put_fixed(v, kValueSimpleValue, float(value));
    put_bytes(summary, kSummaryValue, v);
  }
  const double wall = record.contains("time") && record["time"].is_number() ? record["time"].get<double>() : start_time_;
  std::string event = event_head(wall, record["step"].get<int64_t>());
  put_bytes(event, kSummary, summary);
  return append(event);
}

bool EventFile::write_text(const std::string& tag, const std::string& markdown) {
  std::string tensor;
  put_key(tensor, kTensorDtype, 0);
  put_varint(tensor, kDtString);
  put_bytes(tensor, kTensorShape, "");  // no dimensions: a scalar string
  put_bytes(tensor, kTensorStringVal, markdown);
  return append(plugin_event(tag, "text", "", tensor, start_time_, 0));
}

bool EventFile::write_hparams(const std::vector<std::pair<std::string, ConfigScalar>>& hparams) {
  std::string start_info;
  for (const auto& [key, scalar] : hparams) {
    std::string value, entry;
    // A oneof member is written even at its default (false, 0): that it is set is the value's type.
    if (const bool* b = std::get_if<bool>(&scalar)) {
      put_key(value, kValueBool, 0);
      put_varint(value, *b ? 1 : 0);
    } else if (const double* x = std::get_if<double>(&scalar)) {
      put_fixed(value, kValueNumber, *x);
    } else {
      put_bytes(value, kValueString, std::get<std::string>(scalar));
    }
    put_bytes(entry, kMapKey, key);
    put_bytes(entry, kMapValue, value);
    put_bytes(start_info, kSessionHParams, entry);
  }
  put_fixed(start_info, kSessionStartTime, start_time_);
  std::string plugin_data;
  put_bytes(plugin_data, kHParamsSessionStartInfo, start_info);  // version 0: the default, left out
  return append(plugin_event("_hparams_/session_start_info", "hparams", plugin_data, "", start_time_, 0));
}

bool EventFile::write_session_end(bool succeeded, double end_time, int64_t step) {
  std::string end_info, plugin_data;
  put_key(end_info, kSessionStatus, 0);
  put_varint(end_info, succeeded ? kStatusSuccess : kStatusFailure);
  put_fixed(end_info, kSessionEndTime, end_time);
  put_bytes(plugin_data, kHParamsSessionEndInfo, end_info);
  return append(plugin_event("_hparams_/session_end_info", "hparams", plugin_data, "", end_time, step));
}

bool EventFile::append(const std::string& event) {
  const uint64_t len = event.size();
  const uint32_t len_crc = masked_crc(&len, sizeof len), data_crc = masked_crc(event.data(), event.size());
  errno = 0;
  // One event's bytes in one buffer: a failed write loses that event, and the frames before it stay readable.
  std::string rec(reinterpret_cast<const char*>(&len), sizeof len);
  rec.append(reinterpret_cast<const char*>(&len_crc), sizeof len_crc);
  rec += event;
  rec.append(reinterpret_cast<const char*>(&data_crc), sizeof data_crc);
  const bool ok = fwrite(rec.data(), 1, rec.size(), file_) == rec.size() && fflush(file_) == 0;
  if (!ok) clearerr(file_);
  return ok;
}

}  // namespace zero::pmtrain
