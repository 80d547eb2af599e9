// Paths as users give them on the command line and in configs: relative paths are taken from the
// current directory (not the config's), as a shell would. Every path is made absolute once, here, so
// messages, the resolved config and checkpoints name what was really tried, whichever directory the
// job was launched from.
#pragma once
#include <cstdio>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>

#include "pmtrain/config.h"

namespace zero::pmtrain {

// `path` made absolute against the current directory (lexically normalised; "" stays "").
std::string absolute_path(const std::string& path);

// The absolute path of an input that must exist; ConfigError otherwise, naming `what` (e.g. "--data",
// "data.tokenizer"), the absolute path tried and, for a relative one, the current directory, then `hint` if any.
std::string existing_path(const std::string& path, const std::string& what, const std::string& hint = "");
// existing_path for an HF model directory (model.hf_dir, --model): a missing one given as a Hub id would be
// ("Qwen/Qwen3-4B") also says that pmtrain reads local directories and how to download one.
std::string existing_model_dir(const std::string& path, const std::string& what);

// Where a command's --out rows go: `file` opened at `path` made absolute, or stdout when `path` is "";
// InputError naming --out and the absolute path when it cannot be written.
std::ostream& out_stream(const std::string& path, std::ofstream& file);
// Creates directory `dir` and its parents for `key` (e.g. "run.dir", "--out"): InputError naming the key, the
// directory and the system's reason when it cannot (a file in the way, no permission), not a bare
// filesystem_error.
void make_dir(const std::string& dir, const std::string& key);
// What make_dir would say, without making anything: dir is a directory, or its nearest existing ancestor is one
// this process can create entries in; else InputError naming key, dir and why (a file in the way, no permission).
void check_dir_creatable(const std::string& dir, const std::string& key);
// For a file a command will write (or rewrite) at `path`: InputError naming `key`, the path and the reason when it
// cannot be (a directory of that name, no permission, a read-only file system); a file not there yet passes when
// its directory can be written into.
void check_writable_file(const std::string& path, const std::string& key);

// The files a training run keeps in its run.dir beside the checkpoints (checkpoint/checkpointer.h: step_N/):
// their names, in one place for the trainer that writes them and the commands that read them.
struct RunFiles {
  explicit RunFiles(const std::string& run_dir) : dir(run_dir) {}
  std::string metrics() const { return in_dir("metrics.jsonl"); }                // MetricsLog; pmtrain plot reads it
  std::string resolved_config() const { return in_dir("config.resolved.yaml"); }  // every default, the --set overrides
  std::string tensorboard() const { return in_dir("tensorboard"); }              // run.tensorboard's event file
  std::string dir;

 private:
  std::string in_dir(const char* name) const;
};
// The end of what out_stream opened: flushes stdout or closes the file, and throws InputError naming
// `what` (e.g. "--out"), the path (or standard output) and the system's reason when any of it was not
// written (a full disk): a command never reports success over rows that did not land.
void finish_out(std::ostream& out, std::ofstream& file, const std::string& path, const std::string& what = "--out");
// The standard output kept for a document scripts parse (`pmtrain bench --json`): the libraries below print
// to stdout too (NCCL its version line and every NCCL_DEBUG line unless NCCL_DEBUG_FILE is set: "NCCL version
// 2.28.9+cuda13.0" ahead of bench's JSON broke it on the H200, bench/results/gpu_20261128_h200). The first
// call gives the document a private copy of file descriptor 1 and points 1 at stderr, so whatever else is
// printed to stdout from then on lands in stderr. Call it before the backend starts; later calls return the
// same stream.
FILE* data_stdout();
// Flushes the standard output, C++ streams and C stdio both: nullopt when all of it landed, else the
// system's reason (": No space left on device", or "" when it gave none).
std::optional<std::string> flush_standard_output();

// "$XDG_CACHE_HOME/pmtrain", else "$HOME/.cache/pmtrain": where tokenized datasets are cached when
// data.cache_dir is not set (shared by every run of this user, keyed by content).
std::string default_cache_dir();

// Makes every path of the config absolute, checks that its input files exist (existing_path), and
// fills the data.cache_dir default.
void resolve_paths(Config& cfg);

}  // namespace zero::pmtrain
