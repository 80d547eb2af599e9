#include "checkpoint/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "checkpoint/fault.h"
#include "core/memory.h"

namespace zero::checkpoint {

namespace {
constexpr size_t kChunk = size_t(64) << 20;  // bytes per write/read call

std::string errno_text(int e) {
  return fmt::format("{} (errno {}{})", std::strerror(e), e, e == ENOSPC ? ", ENOSPC" : "");
}

std::string parent_dir(const std::string& path) {
  const auto p = std::filesystem::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}
}  // namespace

FileWriter::FileWriter(std::string path, FaultCounter* faults) : path_(std::move(path)), faults_(faults) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw SaveError(fmt::format("cannot create checkpoint file {}: {}", path_, errno_text(errno)));
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::fail(const char* what, int err) {
  ::close(fd_);
  fd_ = -1;
  throw SaveError(fmt::format("{} checkpoint file {} failed after {} bytes: {}", what, path_, out_.bytes, errno_text(err)));
}

void FileWriter::append(const void* data, size_t bytes) {
  ZERO_CHECK(fd_ >= 0, "FileWriter::append on {} after it finished or failed", path_);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    size_t n = std::min(bytes, kChunk);
    if (faults_) {
      n = faults_->before_write(n);
      if (n == 0) fail("writing", ENOSPC);  // injected: the disk is "full" here
    }
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("writing", errno);
    }
    hasher_.update(p, size_t(w));
    if (faults_) faults_->after_write(size_t(w));
    p += w;
    bytes -= size_t(w);
    out_.bytes += uint64_t(w);
  }
}

WrittenFile FileWriter::finish() {
  ZERO_CHECK(fd_ >= 0, "FileWriter::finish on {} twice, or after it failed", path_);
  if (::fsync(fd_) != 0) fail("fsync of", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw SaveError(fmt::format("closing checkpoint file {} failed: {}", path_, errno_text(errno)));
  out_.xxh64 = hasher_.digest();
  return out_;
}

WrittenFile write_file(const std::string& path, const std::vector<Segment>& segments, FaultCounter* faults) {
  FileWriter w(path, faults);
  for (const Segment& s : segments) w.append(s.data, s.bytes);
  return w.finish();
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw SaveError(fmt::format("cannot open directory {} to fsync it: {}", dir, errno_text(errno)));
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) throw SaveError(fmt::format("fsync of directory {} failed: {}", dir, errno_text(e)));
}

void replace_file_atomic(const std::string& path, const std::string& content, FaultCounter* faults) {
  const std::string tmp = path + ".tmp";
  write_file(tmp, {Segment{content.data(), content.size()}}, faults);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw SaveError(fmt::format("renaming {} to {} failed: {}", tmp, path, errno_text(errno)));
  fsync_dir(parent_dir(path));
}

std::string read_small_file(const std::string& path) {
  ReadFile f(path);
  std::string s(size_t(f.size()), '\0');
  f.read_at(0, s.data(), s.size());
  return s;
}

ReadFile::ReadFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int e = errno;
    throw InputError(e == ENOENT ? fmt::format("checkpoint file {} is missing", path)
                                 : fmt::format("cannot open checkpoint file {}: {}", path, errno_text(e)));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    throw InputError(fmt::format("cannot stat checkpoint file {}: {}", path, errno_text(e)));
  }
  size_ = uint64_t(st.st_size);
}

ReadFile::~ReadFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadFile::read_at(uint64_t offset, void* dst, size_t bytes) const {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t r = ::pread(fd_, p, std::min(bytes, kChunk), off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw InputError(fmt::format("reading checkpoint file {} at byte {} failed: {}", path_, offset, errno_text(errno)));
    if (r == 0)
      throw InputError(fmt::format("checkpoint file {} is truncated: needed {} more bytes at byte {} (file has {})", path_,
                                   bytes, offset, size_));
    p += r;
    offset += uint64_t(r);
    bytes -= size_t(r);
  }
}

uint64_t hash_file(const ReadFile& f, const ReadProgress& on_chunk) {
  Hasher h;
  HostVector<char> buf(std::min<uint64_t>(kChunk, std::max<uint64_t>(f.size(), 1)));
  for (uint64_t off = 0; off < f.size();) {
    const size_t n = size_t(std::min<uint64_t>(buf.size(), f.size() - off));
    f.read_at(off, buf.data(), n);
    h.update(buf.data(), n);
    off += n;
    if (on_chunk) on_chunk(n);
  }
  return h.digest();
}

Hasher::Hasher() : state_(XXH64_createState()) {
  ZERO_CHECK(state_ != nullptr, "XXH64_createState failed");
  XXH64_reset(static_cast<XXH64_state_t*>(state_), 0);
}
Hasher::~Hasher() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }
void Hasher::update(const void* p, size_t n) { XXH64_update(static_cast<XXH64_state_t*>(state_), p, n); }
uint64_t Hasher::digest() const { return XXH64_digest(static_cast<const XXH64_state_t*>(state_)); }

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

uint64_t parse_hex64(const std::string& s, const std::string& what) {
  ZERO_REQUIRE(s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos, InputError,
               "{}: '{}' is not a 16-digit hex xxhash64", what, s);
  return std::stoull(s, nullptr, 16);
}

}  // namespace zero::checkpoint
