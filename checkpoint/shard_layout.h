// The byte layout of a rank file rank_<r>.bin, independent of the stage that wrote it: for each group in
// order, three arrays of `shard` fp32 (master, m, v) holding elements [r*shard, (r+1)*shard) of the
// group's padded range (padding included, zero). Stage 0 keeps the full state on every rank; it writes
// the same slice a sharded stage would, so files never depend on the stage. No I/O.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "zero/engine.h"

namespace zero::checkpoint {

using StateArray = OptimArray;  // file order within a group section: master, m, v

struct FileLayout {
  std::vector<uint64_t> section;  // byte offset of each group's section
  std::vector<size_t> shard;      // elements per array of each group
  uint64_t bytes = 0;             // file size

  static FileLayout of(const std::vector<GroupEntry>& groups);
  uint64_t offset(int g, StateArray a, size_t elem) const {
    return section[g] + (uint64_t(a) * shard[g] + elem) * sizeof(float);
  }
};

// This rank's file, engine <-> host bytes in file order: for each group, this rank's slice
// [rank*shard, (rank+1)*shard) of master, m and v. Goes through the engine's backend copies
// (Engine::read/write_optimizer_state), so it works on device memory as on host memory.
std::vector<char> read_rank_file(Engine& e);
void write_rank_file(Engine& e, const std::vector<char>& bytes);
uint64_t rank_file_bytes(const Engine& e);
// The same from a partition alone (every rank's file has this size): for plans made before any engine exists.
uint64_t rank_file_bytes(const Partition& p);
// The same bytes as read_rank_file, as segments pointing into the engine's own arrays, when they are fp32 in
// host memory (Engine::optimizer_in_host_memory): a synchronous save writes them with no
// copy, so an offloaded optimizer (or the CPU backend's) needs no second host-memory image to be saved.
// Valid until the engine's next step. nullopt when the arrays are not in host memory (device memory, or a
// split master): the caller copies them out with read_rank_file instead.
std::optional<std::vector<Segment>> rank_file_segments(const Engine& e);

}  // namespace zero::checkpoint
