// Whether a complete checkpoint directory can be resumed from, checked against its own manifest: the
// manifest reads and validates, every rank file is there with the listed size and (verify) its xxhash64.
// Filesystem only, no MPI. `--resume auto` (Checkpointer::resume_path) walks the complete checkpoints newest
// first and takes the first without a problem, saying why it skipped any newer one: rank 0 checks the sizes,
// then the ranks hash the files, each its share.
#pragma once
#include <string>

namespace zero::checkpoint {

// "" when the checkpoint is sound, else what is wrong with it (naming the file). With verify, the files hashed
// are those whose index is hash_first, hash_first + hash_stride, ... (one rank's share of the work); every file
// gets the other checks.
std::string checkpoint_problem(const std::string& dir, bool verify, int hash_first = 0, int hash_stride = 1);

}  // namespace zero::checkpoint
