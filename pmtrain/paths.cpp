#include "pmtrain/paths.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <regex>

#include <unistd.h>

#include "core/check.h"
#include "data/line_reader.h"

namespace zero::pmtrain {
namespace fs = std::filesystem;

namespace {
std::string relative_note(const std::string& given) {
  if (fs::path(given).is_absolute()) return "";
  return fmt::format(" (relative paths are taken from the current directory, {})", fs::current_path().string());
}

bool is_glob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }
}  // namespace

std::string absolute_path(const std::string& path) {
  if (path.empty()) return path;
  return fs::absolute(path).lexically_normal().string();
}

std::string existing_path(const std::string& path, const std::string& what, const std::string& hint) {
  ZERO_REQUIRE(!path.empty(), ConfigError, "{}: no path given", what);
  const std::string abs = absolute_path(path);
  ZERO_REQUIRE(fs::exists(abs), ConfigError, "{}: {} does not exist{}{}", what, abs, relative_note(path),
               hint.empty() ? "" : "; " + hint);
  return abs;
}

std::string existing_model_dir(const std::string& path, const std::string& what) {
  // A Hub id is "owner/name": one '/', neither side empty, letters, digits, '-', '_' and '.' (not a leading '.').
  static const std::regex hub_id(R"([A-Za-z0-9_\-][A-Za-z0-9_.\-]*/[A-Za-z0-9_\-][A-Za-z0-9_.\-]*)");
  if (!std::regex_match(path, hub_id)) return existing_path(path, what);
  return existing_path(path, what,
                       fmt::format("if \"{}\" is a Hugging Face Hub id: pmtrain reads a local model directory "
                                   "(config.json and safetensors), so download it first, for example `huggingface-cli "
                                   "download {} --local-dir DIR`, and give DIR",
                                   path, path));
}

std::ostream& out_stream(const std::string& path, std::ofstream& file) {
  if (path.empty()) return std::cout;
  file.open(absolute_path(path));
  ZERO_REQUIRE(file.good(), InputError, "--out: cannot open {} for writing", absolute_path(path));
  return file;
}

void make_dir(const std::string& dir, const std::string& key) {
  check_dir_creatable(dir, key);  // says why it cannot be made (a file in the way, no permission) in one wording
  std::error_code ec;
  fs::create_directories(dir, ec);
  // Only a race with another process gets here: the check above passed a moment ago.
  ZERO_REQUIRE(!ec && fs::is_directory(dir), InputError, "{}: cannot create the directory {}: {}", key, dir,
               ec ? ec.message() : "it is not a directory");
}

void check_dir_creatable(const std::string& dir, const std::string& key) {
  std::error_code ec;
  const fs::path wanted = fs::path(dir).lexically_normal();
  fs::path existing = wanted;
  while (!fs::exists(existing, ec) && existing.has_relative_path()) existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  ZERO_REQUIRE(fs::is_directory(existing, ec), InputError, "{}: cannot create the directory {}: {}", key, dir,
               existing == wanted ? std::string("a file of that name is in the way")
                                  : fmt::format("{} is a file", existing.string()));
  if (existing == wanted) return;  // there already
  ZERO_REQUIRE(access(existing.c_str(), W_OK | X_OK) == 0, InputError, "{}: cannot create the directory {}: {} ({})",
               key, dir, std::strerror(errno), existing.string());
}

std::string RunFiles::in_dir(const char* name) const { return (fs::path(dir) / name).string(); }

void check_writable_file(const std::string& path, const std::string& key) {
  std::error_code ec;
  ZERO_REQUIRE(!fs::is_directory(path, ec), InputError, "{}: cannot write {}: a directory of that name is in the way",
               key, path);
  const bool exists = fs::exists(path, ec);
  const std::string target = exists ? path : fs::path(path).parent_path().string();
  ZERO_REQUIRE(access(target.c_str(), exists ? W_OK : W_OK | X_OK) == 0, InputError, "{}: cannot write {}: {}{}", key,
               path, std::strerror(errno), exists ? "" : fmt::format(" (its directory {})", target));
}

void finish_out(std::ostream& out, std::ofstream& file, const std::string& path, const std::string& what) {
  if (&out != &file) {
    const std::optional<std::string> failed = flush_standard_output();
    ZERO_REQUIRE(!failed, InputError, "{}: writing the standard output failed{}", what, failed.value_or(""));
    return;
  }
  errno = 0;
  file.close();
  ZERO_REQUIRE(!out.fail(), InputError, "{}: writing {} failed{}", what, absolute_path(path),
               errno ? fmt::format(": {}", std::strerror(errno)) : "");
}

FILE* data_stdout() {
  static FILE* const data = [] {
    std::cout.flush();
    fflush(stdout);
    const int fd = dup(STDOUT_FILENO);
    ZERO_CHECK(fd >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0, "cannot set the standard output aside: {}",
               std::strerror(errno));
    FILE* f = fdopen(fd, "w");
    ZERO_CHECK(f != nullptr, "cannot open the standard output's copy: {}", std::strerror(errno));
    return f;
  }();
  return data;
}

std::optional<std::string> flush_standard_output() {
  errno = 0;
  std::cout.flush();
  if (fflush(stdout) == 0 && !ferror(stdout) && !std::cout.fail()) return std::nullopt;
  return errno ? fmt::format(": {}", std::strerror(errno)) : std::string();
}

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return absolute_path(fs::path(xdg) / "pmtrain");
  const char* home = std::getenv("HOME");
  ZERO_REQUIRE(home && *home, ConfigError,
               "data.cache_dir is not set and neither XDG_CACHE_HOME nor HOME is: set data.cache_dir");
  return absolute_path(fs::path(home) / ".cache" / "pmtrain");
}

void resolve_paths(Config& cfg) {
  cfg.run.dir = absolute_path(cfg.run.dir);
  if (!cfg.run.resume.empty() && cfg.run.resume != "auto") cfg.run.resume = existing_path(cfg.run.resume, "run.resume");
  if (!cfg.model.hf_dir.empty()) cfg.model.hf_dir = existing_model_dir(cfg.model.hf_dir, "model.hf_dir");
  cfg.data.tokenizer = existing_path(cfg.data.tokenizer, "data.tokenizer");
  auto resolve_files = [](std::vector<std::string>& files, const std::string& key) {
    for (std::string& f : files) {
      const std::string given = f;
      f = absolute_path(f);
      if (!is_glob(f)) {
        f = existing_path(given, key);
        continue;
      }
      try {
        data::expand_inputs({f});  // a pattern must match something
      } catch (const Error& e) {
        throw ConfigError(fmt::format("{}: {}{}", key, e.what(), relative_note(given)));
      }
    }
  };
  resolve_files(cfg.data.train_files, "data.train_files");
  resolve_files(cfg.data.test_files, "data.test_files");
  for (auto& [name, files] : cfg.data.test_sets) resolve_files(files, "data.test_sets." + name);
  for (auto& [name, files] : cfg.data.train_sets) resolve_files(files, "data.train_sets." + name);
  cfg.data.cache_dir = cfg.data.cache_dir.empty() ? default_cache_dir() : absolute_path(cfg.data.cache_dir);
}

}  // namespace zero::pmtrain
