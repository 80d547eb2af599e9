// POSIX file I/O for checkpoints: durable writes (write, fsync, close; directory fsync), atomic small-file
// replacement (temp + fsync + rename + dir fsync), positioned reads, and xxhash64 of what goes through.
// No MPI, no knowledge of the engine or of the checkpoint layout.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"

namespace zero::checkpoint {

class FaultCounter;

// Writing a checkpoint failed (disk full, permissions, I/O error). The previous checkpoint is intact.
struct SaveError : Error {
  using Error::Error;
};

struct Segment {
  const void* data = nullptr;
  size_t bytes = 0;
};

struct WrittenFile {
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;  // XXH64 (seed 0) of the file's bytes
};

// A FileWriter fed the segments in order.
WrittenFile write_file(const std::string& path, const std::vector<Segment>& segments, FaultCounter* faults = nullptr);
// fsync a directory so that entries created or renamed in it are durable (SaveError).
void fsync_dir(const std::string& dir);
// Replaces `path` atomically: writes path + ".tmp", fsyncs it, renames it over `path`, fsyncs the dir.
// `faults` (may be null) applies to the write of the temp file.
void replace_file_atomic(const std::string& path, const std::string& content, FaultCounter* faults = nullptr);
// A whole small file (manifest, latest); InputError naming the file when missing or unreadable.
std::string read_small_file(const std::string& path);

// A file opened for positioned reads; InputError naming the file on open failure or short read.
class ReadFile {
 public:
  explicit ReadFile(const std::string& path);
  ~ReadFile();
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  void read_at(uint64_t offset, void* dst, size_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// A long read's progress (resume_path's hashing, a load): called, on the reading thread, with the bytes this rank
// has just read or hashed.
using ReadProgress = std::function<void(uint64_t bytes)>;

// XXH64 (seed 0) of a whole file, streamed in large chunks; after each, on_chunk (if given) gets its bytes (a
// long check's progress).
uint64_t hash_file(const ReadFile& f, const ReadProgress& on_chunk = {});

// Streaming XXH64 for code that reads a file piecewise in order.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void update(const void* p, size_t n);
  uint64_t digest() const;

 private:
  void* state_;
};

// A file written front to back in pieces of any size, hashed on the way: for writers that produce it a
// buffer at a time (a rank file streamed from device memory). The constructor creates (truncates) `path`;
// finish() fsyncs and closes it. SaveError naming the file and the errno text on any failure; `faults` (may
// be null) injects kill / ENOSPC for tests. Destroyed unfinished, it closes the partial file (the
// checkpointer then removes its temp dir).
class FileWriter {
 public:
  FileWriter(std::string path, FaultCounter* faults = nullptr);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  void append(const void* data, size_t bytes);
  WrittenFile finish();

 private:
  [[noreturn]] void fail(const char* what, int err);
  std::string path_;
  FaultCounter* faults_;
  int fd_ = -1;
  Hasher hasher_;
  WrittenFile out_;
};

std::string hex64(uint64_t v);  // 16 lowercase hex digits
uint64_t parse_hex64(const std::string& s, const std::string& what);  // InputError naming `what`

}  // namespace zero::checkpoint
