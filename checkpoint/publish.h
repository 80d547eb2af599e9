// Where a run's checkpoints live and how one becomes visible atomically:
//   <run>/checkpoints/.tmp_step_<N>/   being written (any crash leaves only this; removed by the next save)
//   <run>/checkpoints/step_<N>/        complete: renamed from the temp dir once every file is fsynced
//   <run>/checkpoints/latest           "step_<N>\n", replaced by temp file + fsync + rename
//   <run>/checkpoints/best             symlink to step_<N>, the best by an eval metric (Retention::best)
// Retention removes old complete checkpoints. Filesystem only, no MPI: rank 0 calls these.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/fault.h"

namespace zero::checkpoint {

struct RunPaths {
  std::string root;  // <run>/checkpoints
  explicit RunPaths(const std::string& run_dir);
  std::string step_dir(int64_t step) const;
  std::string tmp_dir(int64_t step) const;
  std::string latest_file() const;
  std::string best_link() const;  // <root>/best -> step_<N>, with Retention::best
};

// Creates root if needed, removes every stale .tmp_step_* (left by a crash), creates an empty tmp_dir(step).
void prepare_tmp_dir(const RunPaths& p, int64_t step);
// fsyncs tmp_dir(step), renames it to step_dir(step) (an existing step_dir(step) is replaced), fsyncs root,
// then points `latest` at it. When replacing `latest` fails (SaveError), the rename is undone (step_dir is
// the previous step_<N> again, or gone) before the error goes on, so a failed save publishes nothing.
// `faults`: the injected publish faults (tests).
void publish(const RunPaths& p, int64_t step, const PublishFaults& faults = {});
// Removes tmp_dir(step) (after a failed save); never throws.
void discard_tmp(const RunPaths& p, int64_t step) noexcept;
// Removes root and all in it (complete and temp checkpoints, `latest`, `best`): the checkpoints of an
// earlier run that a new one replaces (pmtrain's run.start_over). A missing root is no error.
void remove_all_checkpoints(const RunPaths& p);

// Steps of the complete checkpoints (step_<N> holding a manifest.json), ascending.
std::vector<int64_t> list_steps(const RunPaths& p);
// The step `latest` names, whether or not that checkpoint is complete; nullopt without a readable `latest`.
std::optional<int64_t> latest_step(const RunPaths& p);
// The newest complete checkpoint of a run as `latest` names it; nullopt when the run has none (no
// `latest`). InputError when `latest` names a directory that is missing or incomplete.
std::optional<std::string> find_latest(const std::string& run_dir);

// For a path given as a checkpoint that is not one: what it is and the checkpoint to give instead (a
// checkpoint's manifest.json or `latest` file, a run directory, its checkpoints root), or "" when nothing
// better can be said. For the error message of a load; never throws.
std::string not_a_checkpoint_hint(const std::string& path);

// The checkpoint to keep by an evaluation metric: the one whose manifest holds the best value at `metric`,
// a JSON pointer into the trainer's extra state (e.g. "/eval/accuracy"); checkpoints without a number
// there are no candidates. Ties keep the earlier step (a later one must be strictly better).
struct BestMetric {
  std::string metric;  // "" = none
  bool higher_is_better = true;
};

struct Retention {
  int keep_last = 3;   // the newest K complete checkpoints (at least 1)
  int keep_every = 0;  // and every one whose step is a multiple of M (0: none)
  BestMetric best;     // and the best by an evaluation metric, which <root>/best (a symlink) names
};
// The step of the best complete checkpoint by `best` and its value; nullopt when none has the metric.
std::optional<std::pair<int64_t, double>> best_checkpoint(const RunPaths& p, const BestMetric& best);
// Removes complete checkpoints that the policy does not keep; never `protect` (the one `latest` names,
// which may not be the highest step when a run was restarted from an older one). With a best metric,
// points <root>/best at the best checkpoint first (replaced atomically: a new symlink renamed over it), so
// `--checkpoint <run>/checkpoints/best` and `pmtrain export <run>/checkpoints/best` reach it. Returns the
// removed steps.
std::vector<int64_t> apply_retention(const RunPaths& p, const Retention& r, int64_t protect);

}  // namespace zero::checkpoint
