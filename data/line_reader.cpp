// LineReader over zlib or stdio with a chunked buffer; glob expansion with glob(3).
#include "data/line_reader.h"

#include <glob.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/check.h"

namespace zero::data {

namespace {
constexpr size_t kChunk = 1 << 18;

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }
bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}
}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns) {
  ZERO_REQUIRE(!patterns.empty(), ConfigError, "data: no input files given");
  std::vector<std::string> files;
  for (const auto& p : patterns) {
    if (!has_glob_chars(p)) {
      ZERO_REQUIRE(std::filesystem::exists(p), InputError, "{}: no such file", p);
      ZERO_REQUIRE(!std::filesystem::is_directory(p), ConfigError,
                   "{}: is a folder; list its files or use a glob such as {}/*/train.jsonl.gz", p, p);
      files.push_back(p);
      continue;
    }
    glob_t g{};
    const int rc = glob(p.c_str(), 0, nullptr, &g);
    std::vector<std::string> hits;
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        if (!std::filesystem::is_directory(g.gl_pathv[i])) hits.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    ZERO_REQUIRE(!hits.empty(), ConfigError, "{}: the pattern matches no file", p);
    std::sort(hits.begin(), hits.end());  // glob sorts by locale; sort bytewise so order never varies
    files.insert(files.end(), hits.begin(), hits.end());
  }
  return files;
}

LineReader::LineReader(std::string path) : path_(std::move(path)), buf_(kChunk) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path_, ec)) {
    const auto bytes = std::filesystem::file_size(path_, ec);
    if (!ec) size_ = int64_t(bytes);
  }
  std::FILE* f = std::fopen(path_.c_str(), "rb");
  ZERO_REQUIRE(f != nullptr, InputError, "{}: cannot open ({})", path_, std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  const bool is_gz = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (!is_gz) {
    if (ends_with(path_, ".gz")) {
      std::fclose(f);
      throw InputError(fmt::format("{}: not a gzip file (name ends in .gz but the gzip magic bytes are missing)",
                                   path_));
    }
    // Not rewound (a pipe cannot be): the bytes read are the buffer's first.
    std::memcpy(buf_.data(), magic, got);
    end_ = got;
    file_ = f;
    return;
  }
  std::fclose(f);
  // zlib reopens the file by name: a pipe would have lost the bytes read above.
  ZERO_REQUIRE(size_ >= 0, InputError,
               "{}: gzip data from a pipe: give the .gz file itself, or decompress into the pipe (zcat FILE | ...)", path_);
  gzFile gz = gzopen(path_.c_str(), "rb");
  ZERO_REQUIRE(gz != nullptr, InputError, "{}: cannot open as gzip", path_);
  gzbuffer(gz, kChunk);
  gz_ = gz;
}

LineReader::~LineReader() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
  if (file_) std::fclose(file_);
}

double LineReader::fraction_read() const {
  if (size_ <= 0) return size_ == 0 ? 1.0 : -1.0;
  // Plain: what stdio has handed over, less what waits in the buffer. Gzip: the compressed bytes zlib took in.
  const int64_t at = gz_ ? int64_t(gzoffset(static_cast<gzFile>(gz_))) : int64_t(ftello(file_)) - int64_t(end_ - begin_);
  return at < 0 ? -1.0 : std::min(1.0, double(at) / double(size_));
}

bool LineReader::fill() {
  if (eof_) return false;
  // Keep the unfinished line at the front, grow when one line exceeds the buffer.
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
  const size_t want = buf_.size() - end_;
  size_t got = 0;
  if (gz_) {
    const int n = gzread(static_cast<gzFile>(gz_), buf_.data() + end_, unsigned(std::min<size_t>(want, 1u << 30)));
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(static_cast<gzFile>(gz_), &err);
      throw InputError(fmt::format("{}:{}: corrupt gzip data ({})", path_, line_no_ + 1, msg ? msg : "?"));
    }
    got = size_t(n);
  } else {
    got = std::fread(buf_.data() + end_, 1, want, file_);
    ZERO_REQUIRE(!std::ferror(file_), InputError, "{}:{}: read error", path_, line_no_ + 1);
  }
  if (got == 0) {
    eof_ = true;
    // zlib reports a truncated stream only through gzerror after the last read.
    if (gz_) {
      int err = 0;
      const char* msg = gzerror(static_cast<gzFile>(gz_), &err);
      ZERO_REQUIRE(err == Z_OK || err == Z_STREAM_END, InputError, "{}:{}: corrupt or truncated gzip data ({})",
                   path_, line_no_ + 1, msg ? msg : "?");
    }
    return false;
  }
  end_ += got;
  return true;
}

bool LineReader::next(std::string& line) {
  size_t scan = begin_;
  for (;;) {
    const char* nl = static_cast<const char*>(std::memchr(buf_.data() + scan, '\n', end_ - scan));
    if (nl) {
      const size_t e = size_t(nl - buf_.data());
      line.assign(buf_.data() + begin_, e - begin_);
      begin_ = e + 1;
      break;
    }
    const size_t seen = end_ - begin_;
    if (!fill()) {
      if (begin_ == end_) return false;
      line.assign(buf_.data() + begin_, end_ - begin_);  // last line without a trailing newline
      begin_ = end_;
      break;
    }
    scan = begin_ + seen;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++line_no_;
  return true;
}

}  // namespace zero::data
