// Loading a sharded checkpoint into an engine, at the world size and stage it was saved with (each rank
// streams its own file: bit-exact) or at any other (each rank reads only the byte ranges its new shard
// needs, reshard_plan.h). Either way through one host buffer of at most chunk_bytes, never a host image
// of the file: loading a device-resident optimizer costs no host memory in proportion to the model. Validates the manifest (format version, model shape), file sizes and xxhash64
// (each file hashed by one rank), and agrees on success across ranks before touching anything
// collective, so every rank throws the same error and none hangs. Collective.
#pragma once
#include <cstdint>
#include <string>

#include "checkpoint/manifest.h"
#include "checkpoint/shard_layout.h"
#include "zero/engine.h"

namespace zero::checkpoint {

struct LoadResult {
  TrainState state;
  std::string dir;
  int64_t optimizer_step = 0;
  int saved_world = 1;         // rank files (a shard group's ranks under hybrid sharding)
  int saved_shard_groups = 1;  // hybrid sharding: the groups that held them
  int saved_stage = 0;
  bool resharded = false;    // read through the general plan (not "each rank its own whole file")
  uint64_t bytes_read = 0;   // by this rank (hash-only passes included)
  std::string config;        // the saving run's resolved config, as its manifest keeps it (Manifest::config)
};

// Restores master, m, v and the optimizer step of every group, then engine.sync_params(). On an error
// (InputError naming the file; a checksum is checked after its file's bytes went in) the engine's optimizer
// state is unspecified: do not train on. `world`: the communicator the ranks agree over (every rank of the
// run: CheckpointOptions::world, required under hybrid sharding); null: the engine's. on_read follows this rank's
// reads and hashing (file_io.h ReadProgress).
LoadResult load_checkpoint(Engine& engine, const std::string& dir, bool verify_checksums = true,
                           size_t chunk_bytes = kRankFileChunkBytes, Communicator* world = nullptr,
                           const ReadProgress& on_read = {});

}  // namespace zero::checkpoint
