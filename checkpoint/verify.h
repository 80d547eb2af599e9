// Whether a complete checkpoint directory can be resumed from, checked against its own manifest: the
// manifest reads and validates, every rank file is there with the listed size and (verify) its xxhash64.
// Filesystem only, no MPI. `--resume auto` walks the complete checkpoints newest first and takes the
// first without a problem, saying why it skipped any newer one.
#pragma once
#include <string>

namespace zero::checkpoint {

// "" when the checkpoint is sound, else what is wrong with it (naming the file).
std::string checkpoint_problem(const std::string& dir, bool verify);

}  // namespace zero::checkpoint
