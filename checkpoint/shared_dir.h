// A run directory is one directory for every rank: each rank writes its rank file into it and rank 0 publishes
// them. On a cluster a node-local path (/tmp, a node's scratch disk) names a different directory on each node,
// which the first save would find out, hours into the run; this finds it at the start.
#pragma once
#include <string>

#include "comm/communicator.h"

namespace zero::checkpoint {

// Collective: rank 0 writes a file holding a fresh nonce into `dir` (which exists on rank 0), every rank reads it
// back, rank 0 removes it. InputError on every rank, naming `what` (the config key), the directory and the lowest
// rank that does not see rank 0's file there (agree's "rank N: " prefix) and its host.
void require_shared_dir(Communicator& comm, const std::string& dir, const std::string& what);

}  // namespace zero::checkpoint
