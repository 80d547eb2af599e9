#include "checkpoint/verify.h"

#include <filesystem>

#include "checkpoint/agree.h"
#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"

namespace zero::checkpoint {

std::string checkpoint_problem(const std::string& dir, bool verify, HashShare share, const ReadProgress& on_read) {
  std::string problem;
  const auto failure = capture([&] {
    const Manifest m = Manifest::read(dir);
    for (size_t q = 0; q < m.files.size(); ++q) {
      const FileEntry& fe = m.files[q];
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
      if (verify && share.mine(q) && hash_file(f, on_read) != fe.xxh64) {
        problem = fmt::format("{} does not match its xxhash64 in the manifest (corrupted)", path);
        return;
      }
    }
  });
  return failure ? failure->message : problem;
}

std::string checkpoint_problem_shared(Communicator& comm, const std::string& dir, const ReadProgress& on_read) {
  const std::string mine = checkpoint_problem(dir, true, HashShare{comm.rank(), comm.world()}, on_read);
  const std::optional<Failure> any =
      agree(comm, mine.empty() ? std::nullopt : std::optional<Failure>(Failure{ErrorKind::Input, mine}));
  return any ? any->message : std::string();
}

std::optional<int64_t> newest_complete_step(const RunPaths& p, double below,
                                            const std::function<void(int64_t step, const std::string& problem)>& skipped) {
  const std::vector<int64_t> steps = list_steps(p);
  const std::optional<int64_t> newest = latest_step(p);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if ((newest && *it > *newest) || double(*it) >= below) continue;
    const std::string problem = checkpoint_problem(p.step_dir(*it), /*verify=*/false);
    if (problem.empty()) return *it;
    skipped(*it, problem);
  }
  return std::nullopt;
}

}  // namespace zero::checkpoint
