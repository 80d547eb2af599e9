// The byte layout of a rank file rank_<r>.bin, independent of the stage that wrote it: for each group in
// order, three arrays of `shard` fp32 (master, m, v) holding elements [r*shard, (r+1)*shard) of the
// group's padded range (padding included, zero). Stage 0 keeps the full state on every rank; it writes
// the same slice a sharded stage would, so files never depend on the stage. No I/O.
#pragma once
#include <cstdint>
#include <vector>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "zero/engine.h"

namespace zero::checkpoint {

enum class StateArray : int { Master = 0, M = 1, V = 2 };

struct FileLayout {
  std::vector<uint64_t> section;  // byte offset of each group's section
  std::vector<size_t> shard;      // elements per array of each group
  uint64_t bytes = 0;             // file size

  static FileLayout of(const std::vector<GroupEntry>& groups);
  uint64_t offset(int g, StateArray a, size_t elem) const {
    return section[g] + (uint64_t(a) * shard[g] + elem) * sizeof(float);
  }
};

// This rank's slice [rank*shard, (rank+1)*shard) of group g's optimizer state, inside the engine's buffers.
struct RankSlice {
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  size_t count = 0;  // = shard
  float* array(StateArray a) const { return a == StateArray::Master ? master : a == StateArray::M ? m : v; }
};
std::vector<RankSlice> engine_rank_slices(Engine& e);

// This rank's file as segments pointing into the engine's optimizer state, in file order.
std::vector<Segment> engine_file_segments(Engine& e);

}  // namespace zero::checkpoint
