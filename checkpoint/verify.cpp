#include "checkpoint/verify.h"

#include <filesystem>

#include "checkpoint/agree.h"
#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"

namespace zero::checkpoint {

std::string checkpoint_problem(const std::string& dir, bool verify) {
  std::string problem;
  const auto failure = capture([&] {
    const Manifest m = Manifest::read(dir);
    for (const FileEntry& fe : m.files) {
      const std::string path = (std::filesystem::path(dir) / fe.name).string();
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) {
        problem = path + " is missing";
        return;
      }
      const ReadFile f(path);
      if (f.size() != fe.bytes) {
        problem = fmt::format("{} has {} bytes, the manifest says {}", path, f.size(), fe.bytes);
        return;
      }
      if (verify && hash_file(f) != fe.xxh64) {
        problem = fmt::format("{} does not match its xxhash64 in the manifest (corrupted)", path);
        return;
      }
    }
  });
  return failure ? failure->message : problem;
}

}  // namespace zero::checkpoint
