// Whether a complete checkpoint directory can be resumed from, checked against its own manifest: the
// manifest reads and validates, every rank file is there with the listed size and (verify) its xxhash64.
// `--resume auto` (Checkpointer::resume_path) walks the complete checkpoints newest first and takes the first
// without a problem, saying why it skipped any newer one: rank 0 checks the sizes, then the ranks hash the
// files, each its share (checkpoint_problem_shared); run.export's checkpoint is checked the same way.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "checkpoint/file_io.h"
#include "checkpoint/publish.h"
#include "comm/communicator.h"

namespace zero::checkpoint {

// Which saved rank files one of `world` ranks hashes when they share the work: file q by rank q mod world, so
// each file is hashed by exactly one rank. The one rule for checkpoint_problem_shared and the resharded load.
struct HashShare {
  int rank = 0;
  int world = 1;  // the default share is every file
  bool mine(size_t file) const { return int(file % size_t(world)) == rank; }
};

// "" when the checkpoint is sound, else what is wrong with it (naming the file). With verify, the files in
// `share` are hashed (on_read follows the bytes); every file gets the other checks.
std::string checkpoint_problem(const std::string& dir, bool verify, HashShare share = {}, const ReadProgress& on_read = {});

// Collective: checkpoint_problem with every file hashed, each by one rank (file q by rank q mod W), all at once:
// the wall time of 1/W of the bytes, not all of them on one rank while the others wait (85 GiB at Qwen3-8B).
// "" on every rank when sound, else the lowest failing rank's problem, on every rank.
std::string checkpoint_problem_shared(Communicator& comm, const std::string& dir, const ReadProgress& on_read = {});

// The step of the newest complete checkpoint of a run whose files are all there at their sizes (a stat each; no
// hashing), newest first below `below` and at most the step `latest` names (a run started over keeps an older
// run's higher steps on disk); each newer one that is not is told to `skipped` with its problem. nullopt when
// none is. Local: resume auto's first pass on rank 0 (Checkpointer::resume_path), and pmtrain's --dry-run.
std::optional<int64_t> newest_complete_step(const RunPaths& p, double below,
                                            const std::function<void(int64_t step, const std::string& problem)>& skipped);

}  // namespace zero::checkpoint
