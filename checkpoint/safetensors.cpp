// safetensors reader, streaming writer and model-directory file set.
#include "checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace zero::checkpoint {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kMaxHeader = 100ull << 20;  // the reference implementation's limit

bool parse_dtype(const std::string& s, DType& out) {
  if (s == "F32") out = DType::F32;
  else if (s == "BF16") out = DType::BF16;
  else if (s == "F16") out = DType::F16;
  else if (s == "F64") out = DType::F64;
  else if (s == "I64") out = DType::I64;
  else if (s == "I32") out = DType::I32;
  else return false;
  return true;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(float(man), -24);  // zero or subnormal
  } else if (exp == 31) {
    f = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | sign);
}

std::string index_json_name() { return "model.safetensors.index.json"; }

}  // namespace

int64_t SafetensorsTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F64: return "F64";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::FX64: return "?";  // an engine accumulator dtype, never stored in safetensors
  }
  return "?";
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- reader ------------------------------------------------------------------------------------------

SafetensorsReader::SafetensorsReader(fs::path path) : path_(std::move(path)) {
  const std::string file = path_.string();
  std::error_code ec;
  const uint64_t size = fs::file_size(path_, ec);
  ZERO_REQUIRE(!ec, InputError, "{}: cannot open safetensors file: {}", file, ec.message());
  std::ifstream in(path_, std::ios::binary);
  ZERO_REQUIRE(in.good(), InputError, "{}: cannot open safetensors file", file);
  ZERO_REQUIRE(size >= 8, InputError, "{}: truncated safetensors file: {} bytes, shorter than the 8-byte header length",
               file, size);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  ZERO_REQUIRE(n <= kMaxHeader, InputError, "{}: not a safetensors file: header length {} exceeds the {} byte limit",
               file, n, kMaxHeader);
  ZERO_REQUIRE(n <= size - 8, InputError,
               "{}: truncated safetensors file: the header says {} header bytes but only {} follow", file, n, size - 8);
  std::string text(n, '\0');
  in.read(text.data(), std::streamsize(n));
  ZERO_REQUIRE(uint64_t(in.gcount()) == n, InputError, "{}: truncated safetensors file while reading the header", file);
  data_start_ = 8 + n;
  data_size_ = size - data_start_;

  json h;
  try {
    h = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: bad safetensors header JSON: {}", file, e.what()));
  }
  ZERO_REQUIRE(h.is_object(), InputError, "{}: bad safetensors header JSON: not an object", file);
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      ZERO_REQUIRE(v.is_object(), InputError, "{}: __metadata__ must be an object of strings", file);
      for (auto m = v.begin(); m != v.end(); ++m) {
        ZERO_REQUIRE(m.value().is_string(), InputError, "{}: __metadata__ value of \"{}\" is not a string", file,
                     m.key());
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    ZERO_REQUIRE(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                 InputError, "{}: bad safetensors header JSON: tensor '{}' needs dtype, shape and data_offsets", file,
                 name);
    SafetensorsTensor t;
    t.name = name;
    ZERO_REQUIRE(v["dtype"].is_string(), InputError, "{}: tensor '{}': dtype is not a string", file, name);
    const std::string dt = v["dtype"].get<std::string>();
    ZERO_REQUIRE(parse_dtype(dt, t.dtype), InputError,
                 "{}: tensor '{}' has unsupported dtype '{}' (supported: F32, BF16, F16, F64, I64, I32)", file, name,
                 dt);
    ZERO_REQUIRE(v["shape"].is_array(), InputError, "{}: tensor '{}': shape is not a list", file, name);
    for (const json& d : v["shape"]) {
      ZERO_REQUIRE(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(INT64_MAX), InputError,
                   "{}: tensor '{}': bad shape {}", file, name, v["shape"].dump());
      t.shape.push_back(d.get<int64_t>());
    }
    const json& off = v["data_offsets"];
    ZERO_REQUIRE(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
                 InputError, "{}: tensor '{}': data_offsets must be two non-negative integers, got {}", file, name,
                 off.dump());
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    ZERO_REQUIRE(t.begin <= t.end, InputError, "{}: tensor '{}': data_offsets [{}, {}] are reversed", file, name,
                 t.begin, t.end);
    // The element count and byte size in 64 bits without wrapping (a header may claim any shape).
    uint64_t numel = 1, want = 0;
    for (int64_t d : t.shape)
      ZERO_REQUIRE(!__builtin_mul_overflow(numel, uint64_t(d), &numel) && numel <= uint64_t(INT64_MAX), InputError,
                   "{}: tensor '{}': shape {} has more elements than fit in 64 bits", file, name, shape_string(t.shape));
    ZERO_REQUIRE(!__builtin_mul_overflow(numel, uint64_t(dtype_size(t.dtype)), &want), InputError,
                 "{}: tensor '{}': shape {} needs more bytes than fit in 64 bits", file, name, shape_string(t.shape));
    ZERO_REQUIRE(t.end - t.begin == want, InputError,
                 "{}: tensor '{}': data_offsets [{}, {}] span {} bytes but {} {} needs {}", file, name, t.begin,
                 t.end, t.end - t.begin, dt, shape_string(t.shape), want);
    ZERO_REQUIRE(t.end <= data_size_, InputError,
                 "{}: tensor '{}': data_offsets [{}, {}] run past the end of the data ({} bytes): the file is "
                 "truncated or corrupt",
                 file, name, t.begin, t.end, data_size_);
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (i > 0)
      ZERO_REQUIRE(tensors_[i].begin >= tensors_[i - 1].end, InputError,
                   "{}: tensors '{}' and '{}' overlap in the data section", file, tensors_[i - 1].name,
                   tensors_[i].name);
    index_[tensors_[i].name] = i;
  }
}

const SafetensorsTensor& SafetensorsReader::tensor(const std::string& name) const {
  auto it = index_.find(name);
  ZERO_REQUIRE(it != index_.end(), InputError, "{}: missing tensor '{}'", path_.string(), name);
  return tensors_[it->second];
}

std::vector<char> SafetensorsReader::read_bytes(const SafetensorsTensor& t, uint64_t offset, uint64_t bytes) const {
  std::ifstream in(path_, std::ios::binary);
  ZERO_REQUIRE(in.good(), InputError, "{}: cannot open safetensors file", path_.string());
  std::vector<char> buf(std::min(bytes, t.end - t.begin - offset));
  in.seekg(std::streamoff(data_start_ + t.begin + offset));
  in.read(buf.data(), std::streamsize(buf.size()));
  ZERO_REQUIRE(uint64_t(in.gcount()) == buf.size(), InputError,
               "{}: truncated safetensors file: tensor '{}' could read only {} of {} bytes", path_.string(), t.name,
               in.gcount(), buf.size());
  return buf;
}

void SafetensorsReader::read_f32(const std::string& name, std::span<float> out) const {
  const SafetensorsTensor& t = tensor(name);
  ZERO_REQUIRE(int64_t(out.size()) == t.numel(), InputError, "{}: tensor '{}' has {} elements {}, the caller expects {}",
               path_.string(), name, t.numel(), shape_string(t.shape), out.size());
  read_f32(name, 0, out);
}

void SafetensorsReader::read_f32(const std::string& name, size_t first, std::span<float> out) const {
  const SafetensorsTensor& t = tensor(name);
  ZERO_REQUIRE(first + out.size() <= uint64_t(t.numel()), InputError,
               "{}: tensor '{}' has {} elements {}, the caller reads [{}, {})", path_.string(), name, t.numel(),
               shape_string(t.shape), first, first + out.size());
  const uint64_t size = dtype_size(t.dtype);
  const std::vector<char> buf = read_bytes(t, first * size, out.size() * size);
  const size_t n = out.size();
  switch (t.dtype) {
    case DType::F32:
      if (n > 0) std::memcpy(out.data(), buf.data(), n * 4);  // an empty tensor's spans may be null
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t u;
        std::memcpy(&u, buf.data() + 2 * i, 2);
        out[i] = std::bit_cast<float>(uint32_t(u) << 16);
      }
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t u;
        std::memcpy(&u, buf.data() + 2 * i, 2);
        out[i] = half_to_float(u);
      }
      break;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, buf.data() + 8 * i, 8);
        out[i] = float(d);
      }
      break;
    default:
      throw InputError(fmt::format("{}: tensor '{}' is {}, not a floating-point tensor", path_.string(), name,
                                   safetensors_dtype_name(t.dtype)));
  }
}

std::vector<float> SafetensorsReader::read_f32(const std::string& name) const {
  std::vector<float> out(size_t(tensor(name).numel()));
  read_f32(name, out);
  return out;
}

std::vector<int64_t> SafetensorsReader::read_i64(const std::string& name) const {
  const SafetensorsTensor& t = tensor(name);
  ZERO_REQUIRE(t.dtype == DType::I64 || t.dtype == DType::I32, InputError,
               "{}: tensor '{}' is {}, not an integer tensor", path_.string(), name, safetensors_dtype_name(t.dtype));
  const std::vector<char> buf = read_bytes(t);
  std::vector<int64_t> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == DType::I64) {
      std::memcpy(&out[i], buf.data() + 8 * i, 8);
    } else {
      int32_t v;
      std::memcpy(&v, buf.data() + 4 * i, 4);
      out[i] = v;
    }
  }
  return out;
}

// ---- writer ------------------------------------------------------------------------------------------

SafetensorsWriter::SafetensorsWriter(fs::path path, std::vector<SafetensorsDecl> tensors,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)), decls_(std::move(tensors)) {
  json h = json::object();
  uint64_t offset = 0;
  for (const SafetensorsDecl& d : decls_) {
    ZERO_REQUIRE(d.dtype == DType::F32 || d.dtype == DType::BF16 || d.dtype == DType::I64, InputError,
                 "{}: tensor '{}': the writer stores F32, BF16 or I64, not {}", path_.string(), d.name,
                 safetensors_dtype_name(d.dtype));
    ZERO_REQUIRE(d.name != "__metadata__" && !h.contains(d.name), InputError, "{}: duplicate or reserved tensor name '{}'",
                 path_.string(), d.name);
    int64_t numel = 1;
    for (int64_t s : d.shape) numel *= s;
    const uint64_t bytes = uint64_t(numel) * dtype_size(d.dtype);
    h[d.name] = {{"dtype", safetensors_dtype_name(d.dtype)}, {"shape", d.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  out_.open(path_, std::ios::binary | std::ios::trunc);
  ZERO_REQUIRE(out_.good(), InputError, "{}: cannot create file", path_.string());
  const uint64_t n = text.size();
  out_.write(reinterpret_cast<const char*>(&n), 8);
  out_.write(text.data(), std::streamsize(text.size()));
}

SafetensorsWriter::~SafetensorsWriter() {
  if (!finished_) {
    out_.close();
    std::error_code ec;
    fs::remove(path_, ec);  // never leave a file whose header promises data it lacks
  }
}

const SafetensorsDecl& SafetensorsWriter::next(const std::string& name, size_t count) {
  ZERO_CHECK(next_ < decls_.size(), "{}: tensor '{}' written after all declared tensors", path_.string(), name);
  const SafetensorsDecl& d = decls_[next_];
  ZERO_CHECK(d.name == name, "{}: tensor '{}' written where '{}' was declared next", path_.string(), name, d.name);
  int64_t numel = 1;
  for (int64_t s : d.shape) numel *= s;
  ZERO_CHECK(int64_t(count) == numel, "{}: tensor '{}' got {} elements, shape {} needs {}", path_.string(), name,
             count, shape_string(d.shape), numel);
  ++next_;
  return d;
}

void SafetensorsWriter::write(const std::string& name, std::span<const float> data) {
  const SafetensorsDecl& d = next(name, data.size());
  if (d.dtype == DType::F32) {
    out_.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * 4));
  } else {
    ZERO_CHECK(d.dtype == DType::BF16, "{}: tensor '{}' declared {}, written as floats", path_.string(), name,
               safetensors_dtype_name(d.dtype));
    std::vector<uint16_t> b(data.size());
    for (size_t i = 0; i < data.size(); ++i) b[i] = Eigen::bfloat16(data[i]).value;  // round to nearest even
    out_.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size() * 2));
  }
  ZERO_REQUIRE(out_.good(), InputError, "{}: write failed (disk full?)", path_.string());
}

void SafetensorsWriter::write(const std::string& name, std::span<const int64_t> data) {
  const SafetensorsDecl& d = next(name, data.size());
  ZERO_CHECK(d.dtype == DType::I64, "{}: tensor '{}' declared {}, written as int64", path_.string(), name,
             safetensors_dtype_name(d.dtype));
  out_.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * 8));
  ZERO_REQUIRE(out_.good(), InputError, "{}: write failed (disk full?)", path_.string());
}

void SafetensorsWriter::finish() {
  ZERO_CHECK(next_ == decls_.size(), "{}: finish() after {} of {} tensors", path_.string(), next_, decls_.size());
  out_.flush();
  ZERO_REQUIRE(out_.good(), InputError, "{}: write failed (disk full?)", path_.string());
  out_.close();
  finished_ = true;
}

void write_safetensors(const fs::path& path, std::span<const SafetensorsF32> tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsDecl> decls;
  for (const SafetensorsF32& t : tensors) decls.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter w(path, std::move(decls), metadata);
  for (const SafetensorsF32& t : tensors) w.write(t.name, t.data);
  w.finish();
}

// ---- model directory ---------------------------------------------------------------------------------

SafetensorsSet SafetensorsSet::open_model_dir(const fs::path& dir) {
  SafetensorsSet set;
  set.dir_ = dir;
  const fs::path index = dir / index_json_name();
  if (fs::exists(index)) {
    std::ifstream in(index);
    ZERO_REQUIRE(in.good(), InputError, "{}: cannot open", index.string());
    json j;
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {
      throw InputError(fmt::format("{}: bad JSON: {}", index.string(), e.what()));
    }
    ZERO_REQUIRE(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), InputError,
                 "{}: no \"weight_map\" object", index.string());
    std::map<std::string, size_t> file_reader;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      ZERO_REQUIRE(it.value().is_string(), InputError, "{}: weight_map[\"{}\"] is not a file name", index.string(),
                   it.key());
      const std::string f = it.value().get<std::string>();
      auto r = file_reader.find(f);
      if (r == file_reader.end()) {
        set.readers_.push_back(std::make_unique<SafetensorsReader>(dir / f));
        r = file_reader.emplace(f, set.readers_.size() - 1).first;
      }
      ZERO_REQUIRE(set.readers_[r->second]->contains(it.key()), InputError,
                   "{}: missing tensor '{}' (the index {} places it in this file)", (dir / f).string(), it.key(),
                   index.string());
      set.where_[it.key()] = r->second;
    }
    return set;
  }
  const fs::path single = dir / "model.safetensors";
  ZERO_REQUIRE(fs::exists(single), InputError, "{}: no model.safetensors or {} (is this an HF model directory?)",
               dir.string(), index_json_name());
  set.readers_.push_back(std::make_unique<SafetensorsReader>(single));
  for (const SafetensorsTensor& t : set.readers_[0]->tensors()) set.where_[t.name] = 0;
  return set;
}

const SafetensorsReader& SafetensorsSet::reader_for(const std::string& name) const {
  auto it = where_.find(name);
  ZERO_REQUIRE(it != where_.end(), InputError, "{}: missing tensor '{}' in the model's safetensors files",
               dir_.string(), name);
  return *readers_[it->second];
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  for (const auto& [n, i] : where_) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> SafetensorsSet::files() const {
  std::vector<fs::path> out;
  for (const auto& r : readers_) out.push_back(r->path());
  return out;
}

}  // namespace zero::checkpoint
