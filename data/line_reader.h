// Line-by-line reading of .jsonl and .jsonl.gz files (zlib), and expansion of file/glob lists.
// Gzip is recognised by its magic bytes; a ".gz" name without them is an error, not plain text.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace zero::data {

// Expands each entry (a file or a glob such as "hh-rlhf/*/train.jsonl.gz") into sorted file paths.
// ConfigError for a folder or a pattern that matches nothing, InputError for a missing file.
std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns);

class LineReader {
 public:
  explicit LineReader(std::string path);  // InputError when missing, unreadable, or ".gz" but not gzip
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Next line without its "\n" (and "\r"); false at end of file. InputError on corrupt gzip data.
  bool next(std::string& line);
  int64_t line_number() const { return line_no_; }  // 1-based number of the line last returned
  const std::string& path() const { return path_; }
  bool gzip() const { return gz_ != nullptr; }
  // How much of the file has been read, in [0, 1] (gzip: of the compressed bytes, read ahead by a buffer);
  // -1 when its size is unknown (a pipe). For progress reports.
  double fraction_read() const;

 private:
  bool fill();  // reads more bytes into buf_; false at end of input

  std::string path_;
  void* gz_ = nullptr;       // gzFile when compressed
  std::FILE* file_ = nullptr;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_no_ = 0;
  int64_t size_ = -1;  // the file's bytes, -1 when not a regular file
};

}  // namespace zero::data
