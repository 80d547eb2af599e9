// safetensors files: a reader that parses the header and reads one tensor at a time (seek + read, never the
// whole file), converting F32/BF16/F16/F64 to fp32 and I64/I32 to int64; a streaming writer (F32, BF16, I64;
// header padded with spaces to a multiple of 8; optional __metadata__); and the file set of an HF model
// directory (model.safetensors, or model.safetensors.index.json's weight_map for sharded models).
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}}, then data.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"

namespace zero::checkpoint {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  int64_t numel() const;
};

// The safetensors dtype string of a DType ("F32", "BF16", ...).
const char* safetensors_dtype_name(DType t);
std::string shape_string(std::span<const int64_t> shape);  // "[72, 48]"

// Every error is an InputError whose message starts with the file path.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::filesystem::path path);  // reads and validates the header only

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in data order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const SafetensorsTensor& tensor(const std::string& name) const;  // throws naming file and tensor

  // Reads a float tensor (F32, BF16, F16, F64) converted to fp32; `out` must have numel() elements.
  void read_f32(const std::string& name, std::span<float> out) const;
  // Elements [first, first + out.size()) of it (flat, row-major): a large tensor a piece at a time, reading
  // only that piece's bytes.
  void read_f32(const std::string& name, size_t first, std::span<float> out) const;
  std::vector<float> read_f32(const std::string& name) const;
  // Reads an integer tensor (I64, I32) as int64.
  std::vector<int64_t> read_i64(const std::string& name) const;

 private:
  std::vector<char> read_bytes(const SafetensorsTensor& t, uint64_t offset = 0, uint64_t bytes = UINT64_MAX) const;

  std::filesystem::path path_;
  uint64_t data_start_ = 0;  // 8 + header length
  uint64_t data_size_ = 0;   // file size - data_start_
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

struct SafetensorsDecl {
  std::string name;
  DType dtype = DType::F32;  // F32, BF16 (round to nearest even from fp32) or I64
  std::vector<int64_t> shape;
};

// Streams a file: declare every tensor up front (the header is written first), then write each tensor's
// data in declaration order, then finish(). Without finish() the destructor removes the partial file.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, std::vector<SafetensorsDecl> tensors,
                    std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void write(const std::string& name, std::span<const float> data);    // F32 or BF16 tensors
  void write(const std::string& name, std::span<const int64_t> data);  // I64 tensors
  void finish();

 private:
  const SafetensorsDecl& next(const std::string& name, size_t count);

  std::filesystem::path path_;
  std::vector<SafetensorsDecl> decls_;
  std::ofstream out_;
  size_t next_ = 0;
  bool finished_ = false;
};

// One-call writer for small files: fp32 data stored as `dtype` (F32 or BF16).
struct SafetensorsF32 {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
  DType dtype = DType::F32;
};
void write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsF32> tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The safetensors files of an HF model directory. With model.safetensors.index.json, the files its
// weight_map names (each tensor must be in the file the index says); otherwise model.safetensors.
class SafetensorsSet {
 public:
  static SafetensorsSet open_model_dir(const std::filesystem::path& dir);

  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  const SafetensorsReader& reader_for(const std::string& name) const;  // throws naming the tensor
  const SafetensorsTensor& tensor(const std::string& name) const { return reader_for(name).tensor(name); }
  std::vector<std::string> names() const;  // sorted
  const std::filesystem::path& dir() const { return dir_; }
  std::vector<std::filesystem::path> files() const;

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::unordered_map<std::string, size_t> where_;  // tensor -> reader
};

}  // namespace zero::checkpoint
