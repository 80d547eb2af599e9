#include "checkpoint/publish.h"

#include <algorithm>
#include <csignal>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "core/check.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

namespace {
// "step_123" -> 123; -1 for anything else.
int64_t parse_step_name(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) return -1;
  return std::stoll(digits);
}

void fs_call(const char* what, const std::string& path, std::error_code ec) {
  if (ec) throw SaveError(fmt::format("{} {} failed: {}", what, path, ec.message()));
}
}  // namespace

RunPaths::RunPaths(const std::string& run_dir) : root((fs::path(run_dir) / "checkpoints").string()) {}
std::string RunPaths::step_dir(int64_t step) const { return (fs::path(root) / fmt::format("step_{}", step)).string(); }
std::string RunPaths::tmp_dir(int64_t step) const { return (fs::path(root) / fmt::format(".tmp_step_{}", step)).string(); }
std::string RunPaths::latest_file() const { return (fs::path(root) / "latest").string(); }
std::string RunPaths::best_link() const { return (fs::path(root) / "best").string(); }

void prepare_tmp_dir(const RunPaths& p, int64_t step) {
  std::error_code ec;
  fs::create_directories(p.root, ec);
  fs_call("creating checkpoint directory", p.root, ec);
  for (const auto& e : fs::directory_iterator(p.root, ec)) {
    const std::string name = e.path().filename().string();
    if (parse_step_name(name, ".tmp_step_") >= 0 || parse_step_name(name, ".old_step_") >= 0) {
      fs::remove_all(e.path(), ec);
      fs_call("removing stale", e.path().string(), ec);
    }
  }
  fs_call("listing", p.root, ec);
  fs::create_directory(p.tmp_dir(step), ec);
  fs_call("creating", p.tmp_dir(step), ec);
}

void publish(const RunPaths& p, int64_t step, const PublishFaults& faults) {
  const std::string tmp = p.tmp_dir(step), dst = p.step_dir(step);
  fsync_dir(tmp);
  std::error_code ec;
  // Re-saving a step (e.g. the final save right after resuming at that step): move the old one aside
  // first; `latest` keeps naming step_<N>, which exists again right after the next rename.
  const std::string old = (fs::path(p.root) / fmt::format(".old_step_{}", step)).string();
  if (fs::exists(dst)) {
    fs::rename(dst, old, ec);
    fs_call("moving aside", dst, ec);
  }
  fs::rename(tmp, dst, ec);
  fs_call("renaming", tmp, ec);
  fsync_dir(p.root);
  if (faults.kill_after_rename) raise(SIGKILL);
  const std::string latest = fmt::format("step_{}\n", step);
  FaultCounter latest_faults(midway(faults.latest, latest.size()));
  try {
    replace_file_atomic(p.latest_file(), latest, &latest_faults);
  } catch (const SaveError&) {
    // `latest` still names the previous checkpoint: put the directories back as they were (best effort;
    // a step_<N> left behind is newer than `latest`, which resume ignores, and the next save replaces it).
    fs::rename(dst, tmp, ec);
    if (fs::exists(old, ec)) fs::rename(old, dst, ec);
    throw;
  }
  fs::remove_all(old, ec);  // best effort: a leftover is removed by the next prepare_tmp_dir
}

void discard_tmp(const RunPaths& p, int64_t step) noexcept {
  std::error_code ec;
  fs::remove_all(p.tmp_dir(step), ec);
}

void remove_all_checkpoints(const RunPaths& p) {
  std::error_code ec;
  fs::remove_all(p.root, ec);
  fs_call("removing the checkpoints", p.root, ec);
}

std::vector<int64_t> list_steps(const RunPaths& p) {
  std::vector<int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(p.root, ec)) return steps;
  for (const auto& e : fs::directory_iterator(p.root, ec)) {
    const int64_t s = parse_step_name(e.path().filename().string(), "step_");
    if (s >= 0 && fs::exists(e.path() / kManifestName, ec)) steps.push_back(s);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

namespace {
// What `latest` says, trimmed; nullopt when there is no `latest`.
std::optional<std::string> latest_name(const RunPaths& p) {
  std::error_code ec;
  if (!fs::exists(p.latest_file(), ec)) return std::nullopt;
  std::string name = read_small_file(p.latest_file());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ' || name.back() == '\r')) name.pop_back();
  return name;
}
}  // namespace

std::optional<int64_t> latest_step(const RunPaths& p) {
  const std::optional<std::string> name = latest_name(p);
  const int64_t step = name ? parse_step_name(*name, "step_") : -1;
  return step >= 0 ? std::optional<int64_t>(step) : std::nullopt;
}

std::string not_a_checkpoint_hint(const std::string& path) try {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "run/checkpoints/" as "run/checkpoints"
  // The checkpoint `latest` names, else the highest complete one; "" when the run has none.
  const auto newest = [](const RunPaths& r) -> std::string {
    std::optional<int64_t> s = latest_step(r);
    if (!s) {
      const std::vector<int64_t> steps = list_steps(r);
      if (!steps.empty()) s = steps.back();
    }
    return s ? r.step_dir(*s) : std::string();
  };
  const auto run_of_root = [](const fs::path& root) {  // RunPaths whose root is `root`, if it is one
    return root.filename() == "checkpoints" ? std::optional<RunPaths>(RunPaths(root.parent_path().string()))
                                            : std::nullopt;
  };
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) {
    if (p.filename() == kManifestName) return fmt::format("it is a checkpoint's manifest; give its directory, {}",
                                                          p.parent_path().string());
    if (p.filename() == "latest")
      if (const auto r = run_of_root(p.parent_path()))
        if (const std::string n = newest(*r); !n.empty())
          return fmt::format("it is the file naming the newest checkpoint; give that checkpoint, {}", n);
    return "it is a file; a checkpoint is a step_<N> directory";
  }
  if (const RunPaths r(path); fs::is_directory(r.root, ec))
    if (const std::string n = newest(r); !n.empty()) return fmt::format("it is a run directory; its newest checkpoint is {}", n);
  if (const auto r = run_of_root(p))
    if (const std::string n = newest(*r); !n.empty()) return fmt::format("it holds a run's checkpoints; the newest is {}", n);
  return "";
} catch (const std::exception&) {  // an unreadable `latest`, say: the load's own message is enough
  return "";
}

std::optional<std::string> find_latest(const std::string& run_dir) {
  const RunPaths p(run_dir);
  const std::optional<std::string> latest = latest_name(p);
  if (!latest) return std::nullopt;
  const std::string& name = *latest;
  std::error_code ec;
  ZERO_REQUIRE(parse_step_name(name, "step_") >= 0, InputError, "{} names '{}', not a step_<N> directory",
               p.latest_file(), name);
  const std::string dir = (fs::path(p.root) / name).string();
  ZERO_REQUIRE(fs::exists(fs::path(dir) / kManifestName, ec), InputError,
               "{} names {}, which is missing or incomplete (no {}); pass --resume with an explicit step directory",
               p.latest_file(), dir, kManifestName);
  return dir;
}

std::optional<std::pair<int64_t, double>> best_checkpoint(const RunPaths& p, const BestMetric& best) {
  std::optional<std::pair<int64_t, double>> found;
  if (best.metric.empty()) return found;
  const nlohmann::json::json_pointer at("/trainer/extra" + best.metric);
  for (int64_t step : list_steps(p)) {
    // A manifest that cannot be read or lacks the metric makes no candidate (load reports what is wrong).
    double v = 0;
    try {
      const auto m = nlohmann::json::parse(read_small_file((fs::path(p.step_dir(step)) / kManifestName).string()));
      if (!m.contains(at) || !m[at].is_number()) continue;
      v = m[at].get<double>();
    } catch (const std::exception&) {
      continue;
    }
    if (!found || (best.higher_is_better ? v > found->second : v < found->second)) found = {step, v};
  }
  return found;
}

namespace {
// Points <root>/best at step_<step> (a relative link, so the run directory can move), or removes it.
void point_best_link(const RunPaths& p, std::optional<int64_t> step) {
  std::error_code ec;
  if (!step) {
    fs::remove(p.best_link(), ec);
    return;
  }
  const std::string tmp = p.best_link() + ".tmp";
  fs::remove(tmp, ec);
  fs::create_directory_symlink(fmt::format("step_{}", *step), tmp, ec);
  fs_call("creating the link", tmp, ec);
  fs::rename(tmp, p.best_link(), ec);
  fs_call("renaming the link", tmp, ec);
  fsync_dir(p.root);
}
}  // namespace

std::vector<int64_t> apply_retention(const RunPaths& p, const Retention& r, int64_t protect) {
  ZERO_REQUIRE(r.keep_last >= 1, ConfigError, "checkpoint keep_last must be at least 1 (got {})", r.keep_last);
  ZERO_REQUIRE(r.keep_every >= 0, ConfigError, "checkpoint keep_every must be 0 or positive (got {})", r.keep_every);
  std::optional<int64_t> best;
  if (!r.best.metric.empty()) {
    if (const auto b = best_checkpoint(p, r.best)) best = b->first;
    point_best_link(p, best);
  }
  const std::vector<int64_t> steps = list_steps(p);
  std::vector<int64_t> removed;
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool recent = i + size_t(r.keep_last) >= steps.size();
    const bool milestone = r.keep_every > 0 && steps[i] % r.keep_every == 0;
    if (recent || milestone || steps[i] == protect || steps[i] == best) continue;
    std::error_code ec;
    fs::remove_all(p.step_dir(steps[i]), ec);
    fs_call("removing old checkpoint", p.step_dir(steps[i]), ec);
    removed.push_back(steps[i]);
  }
  std::error_code ec;  // a `best` left by an earlier policy whose checkpoint is gone now
  if (fs::is_symlink(p.best_link(), ec) && !fs::exists(p.best_link(), ec)) fs::remove(p.best_link(), ec);
  return removed;
}

}  // namespace zero::checkpoint
